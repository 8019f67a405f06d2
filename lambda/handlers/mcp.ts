/**
 * Entry of the MCP Lambda (API Gateway HTTP API, payload format 2.0): module scope runs once per
 * cold start. middy is the thin wrapper, where cross-cutting concerns would attach: no middlewares today.
 *
 * Deliberately not here: anything a test needs to inject (mcp-lambda.ts takes clients and
 * settings), and any logic.
 */
import middy from '@middy/core';
import type { APIGatewayProxyEventV2, APIGatewayProxyStructuredResultV2 } from 'aws-lambda';
import { mcpLambdaSettings } from '../config/settings';
import { mcpLambdaFromSettings } from './mcp-lambda';

const lambda = mcpLambdaFromSettings(mcpLambdaSettings(process.env));

export const handler = middy<APIGatewayProxyEventV2, APIGatewayProxyStructuredResultV2>().handler((event) => lambda(event));

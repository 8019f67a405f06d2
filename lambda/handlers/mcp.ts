/**
 * Entry of the MCP Lambda (API Gateway HTTP API, payload format 2.0). Module scope runs once per
 * cold start: settings from the environment (lambda/config/settings.ts) and the app (see
 * mcp-lambda.ts); the API key read starts here too. The DynamoDB and SQS clients are created on the first request that needs them.
 * The handler itself only translates.
 *
 * middy is the thin wrapper: no middlewares today; it is where cross-cutting concerns (tracing,
 * metrics) would attach without touching the translation.
 *
 * Deliberately not here: anything a test needs to inject (mcp-lambda.ts takes clients and
 * settings), and any logic.
 */
import middy from '@middy/core';
import type { APIGatewayProxyEventV2, APIGatewayProxyStructuredResultV2 } from 'aws-lambda';
import { mcpLambdaSettings } from '../config/settings';
import { mcpLambdaFromSettings } from './mcp-lambda';

// The one place the MCP function reads its environment.
const lambda = mcpLambdaFromSettings(mcpLambdaSettings(process.env));

export const handler = middy<APIGatewayProxyEventV2, APIGatewayProxyStructuredResultV2>().handler((event) => lambda(event));

/**
 * Entry of the Delivery Lambda (SQS event source, `ReportBatchItemFailures`): module scope runs once
 * per cold start. middy is the thin wrapper, as for the MCP Lambda: no middlewares today.
 *
 * Deliberately not here: the MCP SDK, the HTTP app, classic zod, Secrets Manager (this bundle
 * stays small; test/build/delivery-import-graph.test.ts walks its imports), and any logic.
 */
import middy from '@middy/core';
import type { SQSBatchResponse, SQSEvent } from 'aws-lambda';
import { deliveryLambdaSettings } from '../config/settings';
import { createAwsClients } from './aws-clients';
import { deliveryLambdaFromSettings } from './delivery-lambda';

const lambda = deliveryLambdaFromSettings(deliveryLambdaSettings(process.env), createAwsClients());

export const handler = middy<SQSEvent, SQSBatchResponse>().handler((event, context) => lambda(event, context));

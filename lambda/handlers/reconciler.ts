/**
 * Entry of the Reconciler Lambda (an EventBridge rule invokes it every 5 minutes).
 * Module scope runs once per cold start: settings from the environment (the Delivery Lambda's
 * variables), one DynamoDB and one SQS client, the run (see reconciler-lambda.ts).
 *
 * Deliberately not here: the MCP SDK, the HTTP app, Secrets Manager, and any logic.
 */
import middy from '@middy/core';
import { deliveryLambdaSettings } from '../config/settings';
import { createAwsClients } from './aws-clients';
import { reconcilerLambdaFromSettings } from './reconciler-lambda';

const run = reconcilerLambdaFromSettings(deliveryLambdaSettings(process.env), createAwsClients());

export const handler = middy().handler((event: unknown, context) => run(event, context));

/**
 * The Lambdas built from an environment record as their entry files build them (the settings read
 * from the environment, then the handler: lambda/handlers/mcp.ts and delivery.ts), for the tests
 * and the bench that set the environment as the synthesized stack does. Throws SettingsError.
 */
import { deliveryLambdaSettings, mcpLambdaSettings, type Env } from '../../lambda/config/settings';
import type { AwsClients } from '../../lambda/handlers/aws-clients';
import { deliveryLambdaFromSettings, type DeliveryLambdaOverrides } from '../../lambda/handlers/delivery-lambda';
import { mcpLambdaFromSettings, type McpAwsClients, type McpLambdaOverrides } from '../../lambda/handlers/mcp-lambda';

export function mcpLambdaFromEnvironment(env: Env, clients: Partial<McpAwsClients> = {}, overrides: McpLambdaOverrides = {}) {
  return mcpLambdaFromSettings(mcpLambdaSettings(env), clients, overrides);
}

export function deliveryLambdaFromEnvironment(env: Env, clients: AwsClients, overrides: DeliveryLambdaOverrides = {}) {
  return deliveryLambdaFromSettings(deliveryLambdaSettings(env), clients, overrides);
}

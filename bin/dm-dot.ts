#!/usr/bin/env node
/**
 * CDK app entry: builds the stacks (lib/app.ts: the settings from context, the stack named after
 * `-c stage`, the us-east-1 edge stack with `-c protection=waf`) and registers the cdk-nag AWS
 * Solutions checks. Nothing else; see lib/ for what gets built and cdk.json for the defaults.
 */
import { App, Validations } from 'aws-cdk-lib';
import { AwsSolutionsChecks } from 'cdk-nag';
import { addDmDot } from '../lib/app';

const app = new App();
const account = process.env.CDK_DEFAULT_ACCOUNT;
const region = process.env.CDK_DEFAULT_REGION;
addDmDot(app, { ...(account ? { account } : {}), ...(region ? { region } : {}) });
Validations.of(app).addPlugins(new AwsSolutionsChecks(app));

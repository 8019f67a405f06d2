#!/usr/bin/env node
/**
 * CDK app entry: reads the settings from context, creates the stack, registers the cdk-nag
 * AWS Solutions checks. Nothing else; see lib/ for what gets built and cdk.json for the defaults.
 */
import { App, Validations } from 'aws-cdk-lib';
import { AwsSolutionsChecks } from 'cdk-nag';
import { DmDotStack } from '../lib/dm-dot-stack';
import { readSettings } from '../lib/settings';

const app = new App();
new DmDotStack(app, 'DmDot', { settings: readSettings(app.node) });
Validations.of(app).addPlugins(new AwsSolutionsChecks(app));

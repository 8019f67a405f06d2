#!/usr/bin/env node
/**
 * CDK app entry: builds the stacks (lib/app.ts) and registers the cdk-nag AWS Solutions checks. A
 * bad setting is one sentence on stderr, `dm-dot: …`, and exit 1: no stack trace around it.
 */
import { App, Validations } from 'aws-cdk-lib';
import { AwsSolutionsChecks } from 'cdk-nag';
import { addDmDot } from '../lib/app';
import { SettingsError } from '../lib/settings';

const app = new App();
const account = process.env.CDK_DEFAULT_ACCOUNT;
const region = process.env.CDK_DEFAULT_REGION;
try {
  addDmDot(
    app,
    { ...(account ? { account } : {}), ...(region ? { region } : {}) },
    { regionKnown: !!region && process.env.DMDOT_SYNTH_REGION_ASSUMED !== '1' },
  );
} catch (error) {
  if (!(error instanceof SettingsError)) throw error;
  process.stderr.write(`dm-dot: ${error.message}\n`);
  process.exit(1);
}
Validations.of(app).addPlugins(new AwsSolutionsChecks(app));

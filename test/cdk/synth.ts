/**
 * Synthesizes the dm-dot app in-process the way `cdk synth` does (cdk.json's context, cdk-nag
 * registered) into a temporary directory, and hands back what the tests look at: the template,
 * the cloud assembly's directory, the asset directory of a function and the validation report.
 *
 * Each test file synthesizes once and shares the result. The built-in CloudFormation validation is
 * skipped here (CDK_VALIDATION=false, about 5 s); offline-synth.test.ts runs the real CLI with it on.
 */
import { App, type Environment, Validations } from 'aws-cdk-lib';
import { AwsSolutionsChecks } from 'cdk-nag';
import type { IConstruct } from 'constructs';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { addDmDot } from '../../lib/app';
import type { EdgeStack } from '../../lib/constructs/edge-acl';
import type { DmDotStack } from '../../lib/dm-dot-stack';
import { BUNDLE_ROOT as PROJECT_ROOT } from '../../lib/bundling';

// eslint-disable-next-line @typescript-eslint/no-explicit-any
export type Json = any;

export interface Synthesized {
  readonly app: App;
  readonly stack: DmDotStack;
  readonly template: Json;
  /** The us-east-1 edge stack and its template, with `protection` only. */
  readonly edge?: EdgeStack;
  readonly edgeTemplate?: Json;
  readonly outdir: string;
  /** Directory of the bundled code of the Lambda function with this logical id. */
  assetDir(functionLogicalId: string): string;
  /** `validation-report.json` of the cloud assembly (cdk-nag and, when on, CloudFormation validation). */
  readonly validationReport: Json;
  /** Removes the temporary cloud assembly. */
  cleanup(): void;
}

export interface SynthOptions {
  /** Context on top of cdk.json's. */
  readonly context?: Record<string, unknown>;
  /** false skips esbuild (assets are empty placeholders): for tests that only read the template. */
  readonly bundle?: boolean;
  /** What the CDK CLI would find as CDK_DEFAULT_ACCOUNT / CDK_DEFAULT_REGION (needed with protection on). */
  readonly env?: Environment;
}

export function cdkJson(): { app: string; notices?: boolean; context: Record<string, unknown> } {
  return JSON.parse(fs.readFileSync(path.join(PROJECT_ROOT, 'cdk.json'), 'utf8'));
}

export function cdkJsonContext(): Record<string, unknown> {
  return cdkJson().context;
}

export function synthesize(options: SynthOptions = {}): Synthesized {
  const outdir = fs.mkdtempSync(path.join(os.tmpdir(), 'dm-dot-cdk-'));
  const saved = { validation: process.env.CDK_VALIDATION, notifier: process.env.npm_config_update_notifier };
  process.env.CDK_VALIDATION = 'false';
  // Bundling runs `npx --no-install esbuild`: keep npm from checking the registry for updates.
  process.env.npm_config_update_notifier = 'false';
  try {
    const app = new App({
      outdir,
      context: {
        ...cdkJsonContext(),
        ...(options.bundle === false ? { 'aws:cdk:bundling-stacks': [] } : {}),
        ...options.context,
      },
    });
    const { stack, edge } = addDmDot(app, options.env);
    Validations.of(app).addPlugins(new AwsSolutionsChecks(app));
    const assembly = app.synth();
    const template: Json = assembly.getStackByName(stack.stackName).template;
    const edgeTemplate: Json = edge ? assembly.getStackByName(edge.stackName).template : undefined;
    const reportFile = path.join(outdir, 'validation-report.json');
    return {
      app,
      stack,
      template,
      ...(edge ? { edge, edgeTemplate } : {}),
      outdir,
      validationReport: fs.existsSync(reportFile) ? JSON.parse(fs.readFileSync(reportFile, 'utf8')) : { pluginReports: [] },
      assetDir(functionLogicalId: string): string {
        const key: string = template.Resources[functionLogicalId].Properties.Code.S3Key;
        return path.join(outdir, `asset.${key.replace(/\.zip$/, '')}`);
      },
      cleanup: () => fs.rmSync(outdir, { recursive: true, force: true }),
    };
  } catch (error) {
    // A stack that refuses its settings throws while being built: leave no cloud assembly behind.
    fs.rmSync(outdir, { recursive: true, force: true });
    throw error;
  } finally {
    restore('CDK_VALIDATION', saved.validation);
    restore('npm_config_update_notifier', saved.notifier);
  }
}

function restore(name: string, value: string | undefined): void {
  if (value === undefined) delete process.env[name];
  else process.env[name] = value;
}

/** Logical ids of the resources of one CloudFormation type. */
export function logicalIds(template: Json, type: string): string[] {
  return Object.entries(template.Resources as Record<string, { Type: string }>)
    .filter(([, r]) => r.Type === type)
    .map(([id]) => id);
}

/** The only resource of a type whose logical id starts with a prefix (the construct id). */
export function resource(template: Json, type: string, prefix: string): { id: string; Properties: Json } {
  const ids = logicalIds(template, type).filter((id) => id.startsWith(prefix));
  if (ids.length !== 1) throw new Error(`expected one ${type} starting with ${prefix}, found ${ids.join(', ') || 'none'}`);
  const id = ids[0] as string;
  return { id, Properties: template.Resources[id].Properties };
}

/**
 * A copy of the template that does not change when the Lambda code changes: asset hashes become
 * a placeholder and the CDKMetadata resource (an opaque, version-dependent blob) is dropped.
 */
export function stableTemplate(template: Json): Json {
  const copy = JSON.parse(
    JSON.stringify(template, (_key, value: unknown) => (typeof value === 'string' ? value.replace(/[0-9a-f]{64}/g, '<asset-hash>') : value)),
  );
  delete copy.Resources.CDKMetadata;
  delete copy.Conditions?.CDKMetadataAvailable;
  if (copy.Conditions && Object.keys(copy.Conditions).length === 0) delete copy.Conditions;
  return copy;
}

/** Every violation left in a validation report after acknowledgements, as `rule path` lines. */
export function unacknowledgedViolations(report: Json): string[] {
  const lines: string[] = [];
  for (const plugin of report.pluginReports ?? []) {
    for (const violation of plugin.violations ?? []) {
      for (const where of violation.violatingResources ?? violation.violatingConstructs ?? [{}]) {
        lines.push(
          `${plugin.summary?.pluginName ?? plugin.pluginName ?? '?'} ${violation.ruleName} ${violation.severity ?? ''} ${where.constructPath ?? where.resourceLogicalId ?? ''}`.trim(),
        );
      }
    }
  }
  return lines;
}

/** Every rule acknowledged in the construct tree under `root`, with the construct's path and the reason given. */
export function acknowledgements(root: IConstruct): { path: string; rule: string; reason: string }[] {
  const found: { path: string; rule: string; reason: string }[] = [];
  const walk = (c: IConstruct) => {
    for (const entry of c.node.metadata) {
      if (entry.type !== Validations.ACKNOWLEDGED_RULES_METADATA_KEY) continue;
      for (const [id, reason] of Object.entries(entry.data as Record<string, string>)) {
        found.push({ path: c.node.path, rule: id.replace(/^annotation::/i, ''), reason: String(reason) });
      }
    }
    c.node.children.forEach(walk);
  };
  walk(root);
  return found;
}

/**
 * Which stack `--aws` reads (lambda/cli/aws/session.ts): `--stack NAME` as given, `--stage NAME` as
 * the stack `-c stage=NAME` deploys (`DmDot-NAME`, the name lib/app.ts gives it), DMDOT_STACK, then
 * `DmDot`. DescribeStacks is a fake that records the name it was asked for.
 */
import type { DescribeStacksCommand } from '@aws-sdk/client-cloudformation';
import { stackNameOf } from '../../../lambda/config/fields';
import { AwsSession, type AwsFlags } from '../../../lambda/cli/aws/session';
import { Context } from '../../../lambda/cli/context';
import { UsageError } from '../../../lambda/cli/errors';
import type { CliIo } from '../../../lambda/cli/io';

function session(flags: AwsFlags, envStack = 'DmDot') {
  const asked: string[] = [];
  const cloudformation = {
    send: async (command: unknown) => {
      asked.push((command as DescribeStacksCommand).input.StackName as string);
      return { Stacks: [{ Outputs: [{ OutputKey: 'TableName', OutputValue: `table-of-${asked.at(-1)}` }] }] };
    },
  };
  const io = { out: () => undefined, err: () => undefined, aws: { cloudformation } } as unknown as CliIo;
  const ctx = new Context(
    io,
    'status',
    {
      local: () => {
        throw new Error('not local');
      },
      aws: () => ({ stack: envStack }),
    },
    '/',
  );
  return { make: () => new AwsSession(ctx, flags), asked };
}

test('EXPO-3: --stage dev reads the stack DmDot-dev, the name -c stage=dev deploys', async () => {
  const s = session({ stage: 'dev' });
  const aws = s.make();
  expect(aws.stack).toBe('DmDot-dev');
  expect(aws.stack).toBe(stackNameOf('dev'));
  await expect(aws.table()).resolves.toBe('table-of-DmDot-dev');
  expect(s.asked).toEqual(['DmDot-dev']);
});

test('EXPO-3: --stack DmDot-dev finds the same stack; without either, DMDOT_STACK, else DmDot', async () => {
  expect(session({ stack: 'DmDot-dev' }).make().stack).toBe('DmDot-dev');
  expect(session({}, 'DmDot-prod').make().stack).toBe('DmDot-prod');
  expect(session({}).make().stack).toBe('DmDot');
});

test('--stage beside --stack, or a name no stage can have, is bad usage naming the option', () => {
  expect(() => session({ stage: 'dev', stack: 'DmDot' }).make()).toThrow(UsageError);
  expect(() => session({ stage: 'dev', stack: 'DmDot' }).make()).toThrow('give --stack or --stage, not both');
  expect(() => session({ stage: 'dev_1' }).make()).toThrow(UsageError);
  expect(() => session({ stage: 'dev_1' }).make()).toThrow(/^--stage must be 1 to 24 letters, digits or single hyphens, starting with a letter, got "dev_1"$/);
});

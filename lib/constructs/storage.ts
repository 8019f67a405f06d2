/**
 * Storage (docs/contract/storage.md): the one DynamoDB table and the KMS key it is encrypted with, a
 * key of the stack's own because the table holds the dots' signing secrets (none with `-c
 * tableKey=aws-managed`: DynamoDB's own key, docs/deploying-aws.md, "Costs"). Both are retained, and
 * both keep the logical IDs of the first deployments (logical-ids.ts).
 *
 * A function's role gets item actions (`grantItems`), optionally only on items whose partition key
 * matches given patterns (`dynamodb:LeadingKeys`), and the use of the key only when the request
 * comes through DynamoDB in this region (`kms:ViaService`): a role allowed to read the table cannot
 * use the key to decrypt anything else, or call KMS with it directly.
 *
 * Two sparse indexes (lambda/core/store/items.ts; docs/contract/storage.md, STORE-IDX-1 and
 * STORE-IDX-4): `queued`, keys only, which the reconciler alone reads, and `pending`, whole items,
 * which the MCP function reads.
 *
 * Deliberately not here: which actions or items a function needs (its construct says), other
 * indexes, streams, backups beyond point-in-time recovery, replicas, and access for people (the
 * operator CLI uses the operator's own credentials).
 */
import { Fn, RemovalPolicy, Stack, Validations } from 'aws-cdk-lib';
import * as dynamodb from 'aws-cdk-lib/aws-dynamodb';
import * as iam from 'aws-cdk-lib/aws-iam';
import * as kms from 'aws-cdk-lib/aws-kms';
import { Construct } from 'constructs';
import { PendingIndex, QueuedIndex } from '../../lambda/core/store/items';
import type { DmDotSettings } from '../settings';
import { keepLogicalId } from './logical-ids';

/** The item-level DynamoDB actions a function may be granted (none of them reads more than one item). */
export type ItemAction = 'dynamodb:GetItem' | 'dynamodb:PutItem' | 'dynamodb:UpdateItem' | 'dynamodb:DeleteItem';

export class Storage extends Construct {
  readonly table: dynamodb.Table;
  readonly key?: kms.Key;

  constructor(scope: Construct, id: string, props: Pick<DmDotSettings, 'tableKey'>) {
    super(scope, id);

    if (props.tableKey !== 'aws-managed') {
      this.key = new kms.Key(this, 'Key', {
        description: 'dm-dot: encrypts the subscription and delivery table',
        enableKeyRotation: true,
        // The table is retained; its key must outlive the stack with it or the data is unreadable.
        removalPolicy: RemovalPolicy.RETAIN,
      });
      keepLogicalId(this.key, ['TableKey', 'Resource']);
    }

    this.table = new dynamodb.Table(this, 'Table', {
      partitionKey: { name: 'pk', type: dynamodb.AttributeType.STRING },
      billingMode: dynamodb.BillingMode.PAY_PER_REQUEST,
      timeToLiveAttribute: 'ttl',
      pointInTimeRecoverySpecification: { pointInTimeRecoveryEnabled: true },
      ...(this.key ? { encryption: dynamodb.TableEncryption.CUSTOMER_MANAGED, encryptionKey: this.key } : { encryption: dynamodb.TableEncryption.AWS_MANAGED }),
      removalPolicy: RemovalPolicy.RETAIN,
    });
    keepLogicalId(this.table, ['Table', 'Resource']);

    this.table.addGlobalSecondaryIndex({
      indexName: QueuedIndex.name,
      partitionKey: { name: QueuedIndex.partition, type: dynamodb.AttributeType.STRING },
      sortKey: { name: QueuedIndex.sort, type: dynamodb.AttributeType.NUMBER },
      projectionType: dynamodb.ProjectionType.KEYS_ONLY,
    });
    this.table.addGlobalSecondaryIndex({
      indexName: PendingIndex.name,
      partitionKey: { name: PendingIndex.partition, type: dynamodb.AttributeType.STRING },
      sortKey: { name: PendingIndex.sort, type: dynamodb.AttributeType.STRING },
      projectionType: dynamodb.ProjectionType.ALL,
    });
  }

  /** Query on one index (QueuedIndex.name or PendingIndex.name); the key's use comes with the role's `grantItems`. */
  grantIndexQuery(role: iam.Role, indexName: string): void {
    role.addToPrincipalPolicy(new iam.PolicyStatement({ actions: ['dynamodb:Query'], resources: [Fn.join('', [this.table.tableArn, `/index/${indexName}`])] }));
  }

  grantItems(role: iam.Role, actions: readonly ItemAction[], options: { leadingKeys?: readonly string[] } = {}): void {
    role.addToPrincipalPolicy(
      new iam.PolicyStatement({
        actions: [...actions],
        resources: [this.table.tableArn],
        // "ForAllValues": every partition key the request names must match one of the patterns (an item action names
        // exactly one): https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/specifying-conditions.html
        ...(options.leadingKeys ? { conditions: { 'ForAllValues:StringLike': { 'dynamodb:LeadingKeys': [...options.leadingKeys] } } } : {}),
      }),
    );
    // An AWS managed key needs no grant: DynamoDB uses it for whoever may use the table.
    if (!this.key) return;
    role.addToPrincipalPolicy(
      new iam.PolicyStatement({
        // What `grantReadWriteData` gives (the IAM5 acknowledgement below): AWS's example key policy for DynamoDB less
        // `kms:CreateGrant` (table administration), https://docs.aws.amazon.com/kms/latest/developerguide/services-dynamodb.html
        actions: ['kms:Decrypt', 'kms:DescribeKey', 'kms:Encrypt', 'kms:ReEncrypt*', 'kms:GenerateDataKey*'],
        resources: [this.key.keyArn],
        // https://docs.aws.amazon.com/kms/latest/developerguide/conditions-kms.html#conditions-kms-via-service, as in AWS's
        // example key policy for DynamoDB. The endpoint name as the aws and aws-us-gov partitions spell it; the China regions'
        // end in amazonaws.com.cn, which a deployment there would have to check first.
        conditions: { StringEquals: { 'kms:ViaService': Fn.join('', ['dynamodb.', Stack.of(this).region, '.amazonaws.com']) } },
      }),
    );
    for (const action of ['kms:ReEncrypt*', 'kms:GenerateDataKey*']) {
      Validations.of(role).acknowledge({
        id: `AwsSolutions-IAM5[Action::${action}]`,
        reason:
          'The key permissions aws-cdk-lib grants for reading and writing a DynamoDB table encrypted with a ' +
          'customer-managed key, limited to that one key (the resource is its ARN, not a wildcard) and to requests DynamoDB makes.',
      });
    }
  }
}

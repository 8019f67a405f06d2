/**
 * Logical IDs that outlive the construct tree. CloudFormation knows a resource only by its logical
 * ID: give a deployed resource a new one and the next deploy creates a second resource and deletes
 * the first (or, when it is retained, orphans it). The stack was first one flat construct; now that
 * the resources live in constructs of their own, every resource the flat stack had keeps the ID it
 * had at its old path, so an upgrade replaces nothing. What that protects:
 *
 * - data: the table and its key (both retained: a new ID would leave them orphaned and start an
 *   empty table with a new key), the two queues (events in flight, dead letters kept 14 days), the
 *   log groups (their logs would be deleted with them), the alarms (their state and history);
 * - secrets: the API key (a new secret is a new key: every connector stops working) and pup's
 *   signing secrets (the values the operator copied from pup would be gone);
 * - an identity or a fixed name: the HTTP API (its ID is in the endpoint every dot was given), the
 *   alarm topic and its e-mail subscription (a new one waits for the operator to confirm it again,
 *   and deleting the old one unsubscribes the very address the new one points at), the dashboard
 *   (its name is fixed: the new resource takes the name, then deleting the old one removes it);
 * - policies that are an attribute of another resource: the queue and topic policies (replacing
 *   one sets the attribute, then deleting the old one clears it);
 * - the delivery function's event source mapping (Lambda refuses a second mapping of the same queue
 *   to the same function).
 *
 * The MCP function and the HTTP API kept their construct ids and paths (`Mcp`, `Http`). The code
 * names each old path, not its hash (logicalIdAt applies CDK's own rule); the stack tests pin the IDs.
 *
 * Deliberately not here: a general renaming scheme (`Stack.allocateLogicalId`): resources added
 * since get the IDs CDK gives them, and only what existed before is pinned, each where it is created.
 */
import { CfnElement, Names } from 'aws-cdk-lib';
import { Construct, type IConstruct } from 'constructs';

/** The logical ID CDK gives a resource at this path below the stack (construct ids, `Resource` included). */
export function logicalIdAt(path: readonly string[]): string {
  let node = new Construct(undefined as never, '');
  for (const id of path) node = new Construct(node, id);
  return Names.nodeUniqueId(node.node);
}

/** Gives a resource (a CfnElement, or an L2 construct whose default child is one) the logical ID it had at `legacyPath` below the stack. */
export function keepLogicalId(construct: IConstruct, legacyPath: readonly string[]): void {
  const element = construct instanceof CfnElement ? construct : construct.node.defaultChild;
  if (!(element instanceof CfnElement)) throw new Error(`${construct.node.path} has no CloudFormation resource to keep an id for`);
  element.overrideLogicalId(logicalIdAt(legacyPath));
}

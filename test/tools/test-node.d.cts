// Types of test-node.cjs (which says what each is).
export declare const LAMBDA_NODE_MAJOR: number;
export declare const MIN_TEST_NODE_MAJOR: number;
export declare const platformPackage: string;
export declare const machineNodeIsNewEnough: boolean;
export interface TestNode {
  path: string;
  version: string;
  source: string;
}
export declare function testNode(): TestNode | undefined;
export declare function noTestNode(): string;

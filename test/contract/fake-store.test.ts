/**
 * The unit tests' FakeStore (test/support/fakes.ts) passes the same contract as the real adapters,
 * so a core test that passes against the fake means what it would mean against DynamoDB.
 */
import { FakeAccessStore, FakeStore } from '../support/fakes';
import { describeAccessStoreContract } from './access-store.contract';
import { describeStoreContract } from './store.contract';

describeStoreContract('FakeStore (the unit tests’ double)', async () => ({ store: new FakeStore(), cleanup: async () => undefined }));

describeAccessStoreContract('FakeAccessStore (the unit tests’ double)', async () => ({ access: new FakeAccessStore(), cleanup: async () => undefined }));

/**
 * The unit tests' FakeStore (test/support/fakes.ts) is the one Store over a MapTable: it passes
 * the same contract as the real stores, so a core test that passes against the fake means what it
 * would mean against DynamoDB. The MapTable passes the item table contract like the real tables.
 */
import { FakeAccessStore, FakeStore } from '../support/fakes';
import { MapTable } from '../support/map-table';
import { describeAccessStoreContract } from './access-store.contract';
import { describeItemTableContract } from './item-table.contract';
import { describeStoreContract } from './store.contract';

describeItemTableContract('MapTable (the unit tests’ table)', async () => ({ table: new MapTable(), cleanup: async () => undefined }), { transact: true });

describeStoreContract('FakeStore (the unit tests’ double)', async () => ({ store: new FakeStore(), cleanup: async () => undefined }));

describeAccessStoreContract('FakeAccessStore (the unit tests’ double)', async () => ({ access: new FakeAccessStore(), cleanup: async () => undefined }));

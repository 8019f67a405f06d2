/**
 * `dm-dot status`'s text for the delivery jobs: an event delivered inline keeps its safety-net job
 * until the worker next looks, so for a few seconds there are more jobs than queued events; the
 * line says those are for settled events, not deliveries still to come. And the events line.
 */
import { describeLocal } from '../../../lambda/cli/commands/status';
import type { LocalStatus } from '../../../lambda/cli/local-server/local-operator';

function status(jobs: { queued: number; deadLetters: number }, queuedEvents: number): LocalStatus {
  return {
    server: { running: true, url: 'http://127.0.0.1:8787', pid: 1, version: '0.1.0' },
    stateDir: '/s',
    readFrom: 'server',
    apiKey: { from: 'file', file: '/s/api-key' },
    switches: {
      loopbackCallbacks: false,
      pup: false,
      allowedOrigins: [],
      allowedHosts: [],
      retryDelaysS: [1, 4, 30, 120, 600],
      deliveryWaitMs: 3000,
      eventsProfile: 'chatgpt',
    },
    subscription: null,
    events: { queued: queuedEvents, delivered: 3, failed: 0, dropped: 0, kept: 0 },
    jobs,
    damage: null,
  } as LocalStatus;
}

describe('status: delivery jobs', () => {
  it('jobs beyond the queued events are named as those of settled events', () => {
    expect(describeLocal(status({ queued: 1, deadLetters: 0 }, 0))).toMatch(
      /^delivery jobs +1 waiting \(1 for events already settled: the worker clears it within seconds\), 0 dead-lettered$/m,
    );
  });

  it('as many jobs as queued events: nothing to explain', () => {
    expect(describeLocal(status({ queued: 2, deadLetters: 1 }, 2))).toMatch(/^delivery jobs +2 waiting, 1 dead-lettered \(dm-dot redrive\)$/m);
  });
});

describe('status: events', () => {
  it('CLI-7: events kept in the inbox are counted on the events line, and the line says nothing of them when there are none', () => {
    const kept = status({ queued: 0, deadLetters: 0 }, 0);
    expect(describeLocal(kept)).toMatch(/^events +0 queued, 0 failed, 3 delivered, 0 dropped$/m);
    kept.events = { ...kept.events!, kept: 2 };
    expect(describeLocal(kept)).toMatch(/^events +0 queued, 0 failed, 3 delivered, 0 dropped, 2 kept in the inbox$/m);
  });
});

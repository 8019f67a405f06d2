/**
 * What `npm start` prints after its listening line: the switches in force, among them the events
 * profile (always) and the retry schedule (when it is not the default), so that a person who set
 * DMDOT_EVENTS_PROFILE or DMDOT_RETRY_DELAYS sees that it took effect. Never the key.
 */
import { localSettings } from '../../../lambda/config/settings';
import { startupLines } from '../../../lambda/local/runtime';
import { ROOT } from '../../support/paths';

const lines = (env: Record<string, string>) =>
  startupLines(localSettings(env, { projectRoot: ROOT }), 'http://127.0.0.1:8787/mcp', { file: '/s/api-key', generated: false });

describe('the start-up lines', () => {
  it('LOCAL-16: the listening line first; the events profile always; the default retry schedule not at all', () => {
    const shown = lines({});
    expect(shown[0]).toBe('dm-dot listening on http://127.0.0.1:8787/mcp');
    expect(shown).toContain('  events profile: chatgpt (DMDOT_EVENTS_PROFILE)');
    expect(shown.some((l) => l.includes('retry schedule'))).toBe(false);
  });

  it('a non-default profile and retry schedule are shown as set', () => {
    const shown = lines({ DMDOT_EVENTS_PROFILE: 'sep-3415', DMDOT_RETRY_DELAYS: '2,10' });
    expect(shown).toContain('  events profile: sep-3415 (DMDOT_EVENTS_PROFILE)');
    expect(shown).toContain('  retry schedule: 2,10 s after the first attempt (DMDOT_RETRY_DELAYS; default 1,4,30,120,600)');
  });
});

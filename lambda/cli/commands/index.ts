/**
 * Every command, by the words that name it, loaded only when it runs (so `dm-dot --version`
 * loads none), and the command groups with their actions: `events [show|resend]`,
 * `subscription [show|clear]`, `key rotate`, `senders [add|list|revoke]`, `service install|uninstall|status`.
 */
import type { Command } from '../command';

type Loader = () => Promise<Command>;

export const COMMANDS: Readonly<Record<string, Loader>> = {
  dot: async () => (await import('./dot')).command as unknown as Command,
  send: async () => (await import('./send')).command as unknown as Command,
  events: async () => (await import('./events')).command as unknown as Command,
  'events show': async () => (await import('./events-show')).command as unknown as Command,
  'events resend': async () => (await import('./events-resend')).command as unknown as Command,
  'subscription show': async () => (await import('./subscription-show')).command as unknown as Command,
  'subscription clear': async () => (await import('./subscription-clear')).command as unknown as Command,
  redrive: async () => (await import('./redrive')).command as unknown as Command,
  status: async () => (await import('./status')).command as unknown as Command,
  connect: async () => (await import('./connect')).command as unknown as Command,
  'key rotate': async () => (await import('./key-rotate')).command as unknown as Command,
  'senders add': async () => (await import('./senders-add')).command as unknown as Command,
  'senders list': async () => (await import('./senders-list')).command as unknown as Command,
  'senders revoke': async () => (await import('./senders-revoke')).command as unknown as Command,
  'service install': async () => (await import('./service')).install as unknown as Command,
  'service uninstall': async () => (await import('./service')).uninstall as unknown as Command,
  'service status': async () => (await import('./service')).status as unknown as Command,
};

export interface Group {
  /** The command the group's name alone runs; none: an action is required. */
  default?: string;
  /** What the group is for, in its `--help`, when it has no default command to describe it. */
  summary?: string;
  actions: readonly string[];
}

export const GROUPS: Readonly<Record<string, Group>> = {
  events: { default: 'events', actions: ['list', 'show', 'resend'] },
  subscription: { default: 'subscription show', actions: ['show', 'clear'] },
  key: { actions: ['rotate'], summary: 'The connector API key: key rotate [--overlap DURATION] makes a new one (the previous one keeps working that long).' },
  senders: { default: 'senders list', actions: ['add', 'list', 'revoke'] },
  service: {
    actions: ['install', 'uninstall', 'status'],
    summary:
      "Keeps the local server (and OpenAI's tunnel-client, when a profile exists) running under the user's service manager: systemd on Linux, " +
      'launchd on macOS.',
  },
};

/**
 * Run by Jest before every test file (package.json `jest.setupFiles`). The tests build AWS SDK
 * clients on the machine's Node, which may be Node 20: the SDK's warning that its releases after
 * early January 2027 need Node 22 does not apply to the exact versions package.json pins (see
 * docs/decisions.md), so it is turned off with the SDK's own switch, as the CLI does.
 *
 * Deliberately not here: anything a test could depend on.
 */
process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED ??= 'true';

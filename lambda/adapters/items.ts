/**
 * The item keys, for the CDK constructs that scope a function's role to some of them
 * (`dynamodb:LeadingKeys`). What the items mean is the Store's (lambda/core/store/items.ts).
 */
export { ItemKeys } from '../core/store/items';

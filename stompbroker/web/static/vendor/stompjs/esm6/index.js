export * from './client.js';
export * from './frame-impl.js';
export * from './i-frame.js';
export * from './i-message.js';
export * from './parser.js';
export * from './stomp-config.js';
export * from './stomp-headers.js';
export * from './stomp-subscription.js';
export * from './i-transaction.js';
export * from './types.js';
export * from './versions.js';
// Compatibility code
export * from './compatibility/compat-client.js';
export * from './compatibility/stomp.js';
//# sourceMappingURL=index.js.map
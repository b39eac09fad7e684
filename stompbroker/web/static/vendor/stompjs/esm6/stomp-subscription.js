export {};
//# sourceMappingURL=stomp-subscription.js.map
export {};
//# sourceMappingURL=i-frame.js.map
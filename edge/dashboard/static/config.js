// Default settings when the page is opened as a file; `vsense-edge dashboard` serves its own
// config.js (broker URL and credentials from the daemon config). The query string overrides
// both: index.html?url=ws://HOST:9001&base=vsense&device=ID&window=10
window.VSENSE_CONFIG = { url: "ws://localhost:9001", base: "vsense", username: "", password: "",
  device: "", window_s: 10 };

// The scripts of every page (templates/base.html): relative times kept fresh, copy buttons,
// keyboard shortcuts.
import "./time.js";
import "./copy.js";
import "./shortcuts.js";

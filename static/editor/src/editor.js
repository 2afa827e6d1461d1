// Entry point of the workflow editor page (and of its diff mode).
import "./editor.css";
import { Editor } from "./app.js";
import { DiffView } from "./diffview.js";

const config = JSON.parse(document.getElementById("editor-config").textContent);
const root = document.getElementById("editor");
const app = config.mode === "diff" ? new DiffView(root, config) : new Editor(root, config);
// Exposed for the benchmark and for debugging from the console; nothing reads it otherwise.
window.switchyardEditor = app;
app.start();

// The one place that sorts handlers into categories: the palette's groups, the colour and
// the icon of a node on the canvas and in the minimap all come from `categoryOf`.
//
// A handler's category follows from its name (the registry's naming is the node's kind:
// `llm.chat`, `http.request`, `human.approval`, `wait.timer`, `workflow.run`); demo handlers
// are grouped apart so that they never mix with the ones a real workflow uses.

// Icons are 16×16 SVG paths (no icon font: nothing to load, the same in every browser).
const CATEGORIES = [
  {
    key: "core",
    label: "Core",
    colour: "#475569",
    icon: "M3 3h10v10H3z M6 6h4v4H6z",
  },
  {
    key: "http",
    label: "HTTP",
    colour: "#0369a1",
    icon: "M8 1.5a6.5 6.5 0 1 0 0 13a6.5 6.5 0 1 0 0-13z M1.5 8h13 M8 1.5c-3 3-3 10 0 13 M8 1.5c3 3 3 10 0 13",
  },
  {
    key: "llm",
    label: "LLM and agents",
    colour: "#7c3aed",
    icon: "M8 1.5l1.6 4.9l4.9 1.6l-4.9 1.6l-1.6 4.9l-1.6-4.9l-4.9-1.6l4.9-1.6z",
    filled: true,
  },
  {
    key: "human",
    label: "Human and waits",
    colour: "#c2410c",
    icon: "M3.5 1.5h9 M3.5 14.5h9 M4.5 1.5c0 4 7 5 7 13 M11.5 1.5c0 4-7 5-7 13",
  },
  {
    key: "flow",
    label: "Flow",
    colour: "#0f766e",
    icon: "M2 8h4l3-4.5h5 M6 8l3 4.5h5 M12 1.5l2 2l-2 2 M12 10.5l2 2l-2 2",
  },
  {
    key: "other",
    label: "Other",
    colour: "#64748b",
    icon: "M8 2.5a5.5 5.5 0 1 0 0 11a5.5 5.5 0 1 0 0-11z",
  },
  {
    key: "demo",
    label: "Demo",
    colour: "#a16207",
    icon: "M5 3l8 5l-8 5z",
    filled: true,
  },
];
export const CATEGORY_ORDER = CATEGORIES.map((c) => c.key);
const BY_KEY = new Map(CATEGORIES.map((c) => [c.key, c]));

// Handler name prefix (before the first dot) -> category key.
const PREFIXES = new Map([
  ["core", "core"],
  ["http", "http"],
  ["webhook", "http"],
  ["llm", "llm"],
  ["agent", "llm"],
  ["tool", "llm"],
  ["human", "human"],
  ["wait", "human"],
  ["approval", "human"],
  ["workflow", "flow"],
  ["flow", "flow"],
  ["map", "flow"],
  ["demo", "demo"],
]);
export function categoryOf(handlerName) {
  const name = String(handlerName ?? "");
  const key = PREFIXES.get(name.split(".")[0]) ?? "other";
  return BY_KEY.get(key);
}

export function category(key) {
  return BY_KEY.get(key);
}

// The category's icon as an SVG path, drawn in its colour (the element's --cat).
export function paintIcon(path, cat) {
  path.setAttribute("d", cat.icon);
  path.classList.toggle("filled", Boolean(cat.filled));
}

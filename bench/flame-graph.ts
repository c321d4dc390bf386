/**
 * A V8 CPU profile (`node --cpu-prof`) as a flame graph in SVG, with no dependency: each box is a
 * function, its width the share of samples in which it was on the stack, its children above it.
 * Idle and GC samples are left out, so the widths are shares of the CPU the process actually used.
 *
 *   node -r ts-node/register/transpile-only bench/flame-graph.ts <profile.cpuprofile> <out.svg> [title]
 */
import { readFileSync, writeFileSync } from 'node:fs';

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  children?: number[];
}

interface Frame {
  name: string;
  samples: number;
  children: Map<string, Frame>;
}

const SKIP = new Set(['(idle)', '(garbage collector)', '(program)', '(root)']);

function label(node: ProfileNode): string {
  const { functionName, url, lineNumber } = node.callFrame;
  const where = url
    .replace(/^.*node_modules\//, '')
    .replace(/^.*\/(apps|libs)\//, '$1/')
    .replace(/^node:/, '');
  return `${functionName || '(anonymous)'}${where ? ` ${where}:${lineNumber + 1}` : ''}`;
}

export function flameGraph(profile: { nodes: ProfileNode[]; samples: number[] }, title: string): string {
  const byId = new Map(profile.nodes.map((node) => [node.id, node]));
  const parent = new Map<number, number>();
  for (const node of profile.nodes) for (const child of node.children ?? []) parent.set(child, node.id);
  const root: Frame = { name: 'all', samples: 0, children: new Map() };
  for (const id of profile.samples) {
    const leaf = byId.get(id)!;
    if (SKIP.has(leaf.callFrame.functionName)) continue;
    const stack: string[] = [];
    for (let at: number | undefined = id; at !== undefined; at = parent.get(at)) {
      const node = byId.get(at)!;
      if (node.callFrame.functionName !== '(root)') stack.unshift(label(node));
    }
    root.samples++;
    let frame = root;
    for (const name of stack) {
      let next = frame.children.get(name);
      if (!next) frame.children.set(name, (next = { name, samples: 0, children: new Map() }));
      next.samples++;
      frame = next;
    }
  }

  const width = 1200;
  const rowHeight = 16;
  const boxes: string[] = [];
  let depth = 0;
  const draw = (frame: Frame, x: number, level: number) => {
    const w = (frame.samples / root.samples) * width;
    if (w < 0.5) return;
    depth = Math.max(depth, level);
    const share = ((100 * frame.samples) / root.samples).toFixed(1);
    const hue = frame.name.includes('node_modules') || !/ (apps|libs)\//.test(frame.name) ? 30 : 200;
    const text = w > 40 ? escape(frame.name).slice(0, Math.floor(w / 6.5)) : '';
    boxes.push(
      `<g><title>${escape(frame.name)} (${share} %)</title><rect x="${x.toFixed(1)}" y="LEVEL${level}" width="${(w - 0.5).toFixed(1)}" height="${rowHeight - 1}" ` +
        `fill="hsl(${hue},${55 + (frame.name.length % 30)}%,${60 + (frame.samples % 15)}%)"/>` +
        (text ? `<text x="${(x + 3).toFixed(1)}" y="LEVEL${level}T">${text}</text>` : '') +
        '</g>',
    );
    let childX = x;
    for (const child of [...frame.children.values()].sort((a, b) => a.name.localeCompare(b.name))) {
      draw(child, childX, level + 1);
      childX += (child.samples / root.samples) * width;
    }
  };
  draw(root, 0, 0);
  const height = (depth + 1) * rowHeight + 40;
  const y = (level: number) => height - 10 - (level + 1) * rowHeight;
  const svg = boxes.map((box) =>
    box.replace(/LEVEL(\d+)T/g, (_m, l) => String(y(Number(l)) + 12)).replace(/LEVEL(\d+)/g, (_m, l) => String(y(Number(l)))),
  );
  return [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" font-family="monospace" font-size="11">`,
    `<text x="4" y="16" font-size="14">${escape(title)} — ${root.samples} samples on CPU; width = share of them (hover for names)</text>`,
    ...svg,
    '</svg>',
  ].join('\n');
}

function escape(text: string): string {
  return text.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;');
}

if (require.main === module) {
  const [input, output, title = input] = process.argv.slice(2);
  if (!input || !output) {
    process.stderr.write('usage: flame-graph <profile.cpuprofile> <out.svg> [title]\n');
    process.exit(2);
  }
  writeFileSync(output, flameGraph(JSON.parse(readFileSync(input, 'utf8')), title));
}

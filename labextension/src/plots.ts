/**
 * A sweep's two plots, as SVG figures built from plain data (no requests, no state): each finished
 * trial's objective in trial order with the best so far (`objectivePlot`), and each trial's own
 * metric over its steps (`seriesPlot`, the lines of `series.ts`), each with axes and round values on
 * them (`ticks`, numbers as the widgets format them). Colours are theme variables (style/index.css);
 * every string through `trans`.
 */

import { TranslationBundle } from '@jupyterlab/translation';

import { el } from './dom';
import { formatNumber, Job, plotPoints } from './format';
import { SeriesLine } from './series';

const SVG = 'http://www.w3.org/2000/svg';
const W = 240;
const H = 110;
// room for the axes' values: left of the y axis, below the x axis (as the widgets' plots have)
const LEFT = 36;
const BOTTOM = 16;
const PAD = 6;

/** An empty plot of the panel's size, an image for assistive technology with `label`. */
function plotSvg(cls: string, label: string): SVGSVGElement {
  const svg = document.createElementNS(SVG, 'svg');
  svg.setAttribute('viewBox', `0 0 ${W} ${H}`);
  svg.setAttribute('class', cls);
  svg.setAttribute('role', 'img');
  svg.setAttribute('aria-label', label);
  return svg;
}

/** The lowest and highest of `values` (by reduce, not Math.min(...): a big sweep's points would
 * pass too many arguments). */
function bounds(values: number[]): [number, number] {
  return values.reduce(([lo, hi], v) => [Math.min(lo, v), Math.max(hi, v)], [Infinity, -Infinity]);
}

/**
 * About `count` round values within [lo, hi] (steps of 1, 2 or 5 times a power of ten), as the
 * widgets' plots label their axes; one value when lo equals hi.
 */
export function ticks(lo: number, hi: number, count = 4): number[] {
  if (!isFinite(lo) || !isFinite(hi)) {
    return [];
  }
  if (hi === lo) {
    return [lo];
  }
  const raw = (hi - lo) / count;
  const power = Math.pow(10, Math.floor(Math.log10(raw)));
  const step = [1, 2, 5, 10].map(m => m * power).find(s => s >= raw) ?? 10 * power;
  const out: number[] = [];
  for (let v = Math.ceil(lo / step) * step; v <= hi + step * 1e-9; v += step) {
    out.push(Number(v.toPrecision(12)));
  }
  return out;
}

function svgNode(tag: string, cls: string, attrs: Record<string, string | number>, text?: string): SVGElement {
  const node = document.createElementNS(SVG, tag);
  node.setAttribute('class', cls);
  for (const [k, v] of Object.entries(attrs)) {
    node.setAttribute(k, String(v));
  }
  if (text !== undefined) {
    node.textContent = text;
  }
  return node;
}

/**
 * The plot's axes with their values drawn into `svg` (x: trials or steps, whole numbers; y: the
 * metric), and where a point's x and y are drawn: the values' bounds spread over the area the axes
 * frame.
 */
function axes(svg: SVGSVGElement, xs: number[], ys: number[]): { x: (v: number) => number; y: (v: number) => number } {
  const [x0, x1] = bounds(xs);
  const [y0, y1] = bounds(ys);
  const x = (v: number) => LEFT + ((v - x0) / (x1 - x0 || 1)) * (W - LEFT - PAD);
  const y = (v: number) => H - BOTTOM - ((v - y0) / (y1 - y0 || 1)) * (H - BOTTOM - PAD);
  svg.append(
    svgNode('line', 'mlp-axis', { x1: LEFT, y1: PAD, x2: LEFT, y2: H - BOTTOM }),
    svgNode('line', 'mlp-axis', { x1: LEFT, y1: H - BOTTOM, x2: W - PAD, y2: H - BOTTOM })
  );
  for (const v of ticks(y0, y1)) {
    svg.append(svgNode('text', 'mlp-tick mlp-tick-y', { x: LEFT - 3, y: y(v) + 3, 'text-anchor': 'end' },
      formatNumber(v)));
  }
  for (const v of ticks(x0, x1).filter(Number.isInteger)) {
    svg.append(svgNode('text', 'mlp-tick mlp-tick-x', { x: x(v), y: H - 4, 'text-anchor': 'middle' }, String(v)));
  }
  return { x, y };
}

/** Each finished trial's objective in trial order, and the best so far: an SVG that grows. */
export function objectivePlot(job: Job, trans: TranslationBundle): Element {
  const points = plotPoints(job);
  const figure = el('figure', 'mlp-plot');
  const metric = job.trainingInput?.hyperparameters?.hyperparameterMetricTag || trans.__('objective');
  const caption = el('figcaption', '', trans.__('%1 by trial (line: best so far)', metric));
  figure.append(caption);
  const svg = plotSvg(
    'mlp-plot-svg',
    points.length
      ? trans.__('%1 of %2 trials finished; best %3', points.length, job.trainingOutput?.trials?.length ?? 0,
        formatNumber(points[points.length - 1].best))
      : trans.__('No trial has finished yet')
  );
  svg.dataset.points = String(points.length);
  if (points.length) {
    const { x, y } = axes(svg, points.map(p => p.trial), points.map(p => p.value));
    const line = document.createElementNS(SVG, 'polyline');
    line.setAttribute('class', 'mlp-plot-best');
    line.setAttribute('points', points.map(p => `${x(p.trial)},${y(p.best)}`).join(' '));
    svg.appendChild(line);
    for (const p of points) {
      const dot = document.createElementNS(SVG, 'circle');
      dot.setAttribute('class', 'mlp-plot-point');
      dot.setAttribute('cx', String(x(p.trial)));
      dot.setAttribute('cy', String(y(p.value)));
      dot.setAttribute('r', '3');
      const title = document.createElementNS(SVG, 'title');
      title.textContent = trans.__('trial %1: %2', p.trial, String(p.value));
      dot.appendChild(title);
      svg.appendChild(dot);
    }
  }
  figure.append(svg);
  return figure;
}

/** Each trial's own metric over its steps, one line per trial, the best trial's drawn thick and last. */
export function seriesPlot(job: Job, lines: SeriesLine[], trans: TranslationBundle): Element {
  const best = lines.find(l => l.best);
  const figure = el('figure', 'mlp-plot mlp-series-plot');
  const metric = job.trainingInput?.hyperparameters?.hyperparameterMetricTag || trans.__('objective');
  figure.append(el('figcaption', '', trans.__('%1 by step, each trial (thick line: the best trial)', metric)));
  const svg = plotSvg(
    'mlp-series-svg',
    lines.length
      ? trans.__('%1 trials reported %2; best trial %3', lines.length, metric, best?.trialId ?? '-')
      : trans.__('No trial has reported %1 yet', metric)
  );
  svg.dataset.lines = String(lines.length);
  svg.dataset.points = String(lines.reduce((n, l) => n + l.points.length, 0));
  const all = lines.flatMap(l => l.points);
  if (all.length) {
    const { x, y } = axes(svg, all.map(p => p.step), all.map(p => p.value));
    for (const line of [...lines.filter(l => !l.best), ...lines.filter(l => l.best)]) {
      const node = document.createElementNS(SVG, 'polyline');
      node.setAttribute('class', line.best ? 'mlp-series mlp-series-best' : 'mlp-series');
      node.setAttribute('points', line.points.map(p => `${x(p.step)},${y(p.value)}`).join(' '));
      node.dataset.trialId = line.trialId;
      node.dataset.points = String(line.points.length);
      const last = line.points[line.points.length - 1];
      const title = document.createElementNS(SVG, 'title');
      title.textContent = trans.__('trial %1: %2 at step %3', line.trialId, formatNumber(last.value),
        last.step);
      node.appendChild(title);
      svg.appendChild(node);
    }
  }
  figure.append(svg);
  return figure;
}

/**
 * Translations ready: every user string of the panel goes through JupyterLab's translation bundle
 * (`trans.__`, `trans._n`, `trans._p`) of the domain `jupyterhub_mlplatform`. A lint over
 * src/*.ts: each string literal that reads as words (two words in a row, or one capitalised
 * word) must be the message of a `trans` call, unless it is a developer's message
 * (`console.*`, `new Error`), a key name, CSS classes, or its line says `// not translated: why`.
 * Comments are skipped.
 */

import { readFileSync, readdirSync } from 'fs';
import { join } from 'path';
import { describe, expect, it } from 'vitest';

import { Translate, accelerator, english, explainState, formatDuration, trialProgress } from '../src/format';

const SRC = join(__dirname, '..', 'src');

interface Literal {
  text: string;
  start: number;
}

/** The string literals of TypeScript `source` (template literals with each `${…}` as `{}`), comments skipped. */
export function literals(source: string): Literal[] {
  const out: Literal[] = [];
  // open templates, innermost last: the text so far, where it began, the brace depth of its `${`
  const open: { text: string; start: number; depth: number }[] = [];
  let depth = 0;
  let i = 0;
  /** Read template text from `i` (after a backtick or the `}` of a `${…}`) for `tpl`; returns where code resumes. */
  const readTemplate = (tpl: { text: string; start: number }, j: number): number => {
    while (j < source.length) {
      const c = source[j];
      if (c === '\\') {
        tpl.text += source.slice(j, j + 2);
        j += 2;
      } else if (c === '`') {
        out.push({ text: tpl.text, start: tpl.start });
        return j + 1;
      } else if (c === '$' && source[j + 1] === '{') {
        tpl.text += '{}';
        open.push({ ...tpl, depth });
        depth++;
        return j + 2;
      } else {
        tpl.text += c;
        j++;
      }
    }
    return j;
  };
  while (i < source.length) {
    const c = source[i];
    if (c === '/' && source[i + 1] === '/') {
      i = source.indexOf('\n', i);
      i = i < 0 ? source.length : i;
    } else if (c === '/' && source[i + 1] === '*') {
      i = source.indexOf('*/', i + 2) + 2;
    } else if (c === "'" || c === '"') {
      let j = i + 1;
      while (j < source.length && source[j] !== c && source[j] !== '\n') {
        j += source[j] === '\\' ? 2 : 1;
      }
      out.push({ text: source.slice(i + 1, j), start: i });
      i = j + 1;
    } else if (c === '`') {
      i = readTemplate({ text: '', start: i }, i + 1);
    } else if (c === '{') {
      depth++;
      i++;
    } else if (c === '}') {
      depth--;
      i++;
      if (open.length && open[open.length - 1].depth === depth) {
        i = readTemplate(open.pop()!, i);
      }
    } else {
      i++;
    }
  }
  return out;
}

const KEYS = new Set(['Enter', 'Escape', 'Home', 'End', 'ArrowUp', 'ArrowDown', 'ArrowLeft', 'ArrowRight', 'Tab']);

function readsAsWords(text: string): boolean {
  const words = text.replace(/\{\}/g, ' ');
  if (text.trimStart().startsWith('<')) {
    return false; // markup (the icon's SVG)
  }
  if (/^[\w.-]+(\s+[\w.-]+)*$/.test(words.trim()) && words.trim().split(/\s+/).every(w => /[-.]/.test(w))) {
    return false; // CSS classes, module paths: 'mlp-log-search jp-mod-styled'
  }
  return /[A-Za-z]{2,}[ ,;.!?…]+[A-Za-z]{2,}/.test(words) || /^[A-Z][a-z]+$/.test(words.trim());
}

/** Untranslated user strings in `source`, as "line: text". */
export function untranslated(source: string): string[] {
  const lines = source.split('\n');
  const found: string[] = [];
  for (const { text, start } of literals(source)) {
    if (!readsAsWords(text) || KEYS.has(text)) {
      continue;
    }
    const before = source.slice(Math.max(0, start - 200), start);
    if (/trans\._[_np]\(\s*$/.test(before) || /trans\._[np]\(\s*(['"`])[^'"`]*\1,\s*$/.test(before)) {
      continue; // the message (or the plural) of a translation call
    }
    if (/(console\.\w+|new Error)\(\s*$/.test(before)) {
      continue;
    }
    const line = source.slice(0, start).split('\n').length;
    if (/\/\/ not translated:/.test(lines[line - 1])) {
      continue;
    }
    found.push(`${line}: ${text}`);
  }
  return found;
}

describe('translations', () => {
  it('the lint finds an untranslated string and lets translated ones, comments and classes pass', () => {
    const src = [
      '// A comment that reads as words',
      "el('p', 'mlp-empty', trans.__('No jobs yet'));",
      "label.textContent = 'Project name';",
      "trans._n('%1 job running', '%1 jobs running', n);",
      "node.className = 'mlp-log-search jp-mod-styled';",
      'const s = `${done} of ${max} trials`;',
      "if (e.key === 'Enter') {}",
      "placeholder = 'goal: MAXIMIZE'; // not translated: YAML"
    ].join('\n');
    expect(untranslated(src)).toEqual(['3: Project name', '6: {} of {} trials']);
    expect(literals('a(`x ${f({ k: `in ${y}` })} z`)').map(l => l.text)).toEqual(['in {}', 'x {} z']);
  });

  for (const name of readdirSync(SRC).filter(n => n.endsWith('.ts'))) {
    it(`every user string of src/${name} goes through trans`, () => {
      expect(untranslated(readFileSync(join(SRC, name), 'utf-8'))).toEqual([]);
    });
  }

  it('formatting speaks through the bundle it is given (a language pack), English without one', () => {
    const fr: Record<string, string> = {
      'CPU only': 'CPU seulement',
      'Failed: %1': 'Échec : %1',
      '%1m %2s': '%1 min %2 s',
      '%2 of %1 trial': '%2 sur %1 essai',
      '%2 of %1 trials': '%2 sur %1 essais'
    };
    const bundle: Translate = {
      __: (m, ...a) => english.__(fr[m] ?? m, ...a),
      _n: (m, p, n, ...a) => english._n(fr[m] ?? m, fr[p] ?? p, n, ...a)
    };
    expect(accelerator({ jobId: 'j' }, bundle)).toBe('CPU seulement');
    expect(explainState({ jobId: 'j', state: 'FAILED', errorMessage: 'OOM' }, bundle)).toBe('Échec : OOM');
    expect(formatDuration(65, bundle)).toBe('1 min 05 s');
    const sweep = (max: number) => ({
      jobId: 's',
      trainingInput: { hyperparameters: { maxTrials: max } },
      trainingOutput: { completedTrialCount: '0' }
    });
    expect(trialProgress(sweep(1), bundle)).toBe('0 sur 1 essai');
    expect(trialProgress(sweep(4), bundle)).toBe('0 sur 4 essais');
    expect(trialProgress(sweep(1))).toBe('0 of 1 trial');
  });

  it('the extension loads one domain, the settings schema is translated in it', () => {
    const index = readFileSync(join(SRC, 'index.ts'), 'utf-8');
    expect([...index.matchAll(/\.load\('([^']+)'\)/g)].map(m => m[1])).toEqual(['jupyterhub_mlplatform']);
    const schema = JSON.parse(readFileSync(join(__dirname, '..', 'schema', 'plugin.json'), 'utf-8'));
    expect(schema['jupyter.lab.internationalization']?.domain).toBe('jupyterhub_mlplatform');
  });
});

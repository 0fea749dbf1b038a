/**
 * Pure parts of "Submit as training job": the form's first values for a file, and which form field
 * shows an error the server names (the table comes from the server: `GET …/submitForm`'s
 * `fields`, the notebook widget's own). Unit tested in test/submit.test.ts.
 */

export type FormValues = {
  job_id: string;
  module: string;
  package_path: string;
  args: string;
  scale_tier: string;
  machine_type: string;
  accelerator: string;
  accelerator_count: number;
  project: string;
  credentials: string[];
  datasets: string[];
  hyperparameters_on: boolean;
  hyperparameters: string;
};

export const FIELD_NAMES: (keyof FormValues)[] = [
  'job_id',
  'module',
  'package_path',
  'args',
  'scale_tier',
  'machine_type',
  'accelerator',
  'accelerator_count',
  'project',
  'credentials',
  'datasets',
  'hyperparameters_on',
  'hyperparameters'
];

export function emptyValues(project: string): FormValues {
  return {
    job_id: '',
    module: '',
    package_path: '',
    args: '',
    scale_tier: 'BASIC',
    machine_type: '',
    accelerator: '',
    accelerator_count: 1,
    project,
    credentials: [],
    datasets: [],
    hyperparameters_on: false,
    hyperparameters: ''
  };
}

/**
 * The form's first values for a file the user right-clicked or has open (a path relative to the
 * server's root): a Python file in a package directory gives the package (its directory) and the
 * module (`<package>.<file stem>`, what `python -m` runs); anything else gives its directory.
 */
export function valuesForPath(path: string): Partial<FormValues> {
  const parts = path.split('/').filter(Boolean);
  const file = parts.pop() ?? '';
  const dir = parts.join('/');
  if (file.endsWith('.py') && parts.length) {
    const stem = file.slice(0, -3);
    return { package_path: dir, module: `${parts[parts.length - 1]}.${stem}` };
  }
  return dir ? { package_path: dir } : {};
}

/**
 * The form field showing an error about `field` (the server's spelling), and the place inside it
 * (`params[1].minValue`); ['', ''] when none does (shown above the button). The longest table key
 * that is the field or a prefix of it up to '.' or '[' wins.
 */
export function fieldOf(field: string, table: Record<string, string>): [string, string] {
  const name = field.replace(/ in config$/, '');
  const keys = Object.keys(table).sort((a, b) => b.length - a.length);
  for (const key of keys) {
    if (name === key || name.startsWith(key + '.') || name.startsWith(key + '[')) {
      return [table[key], name.slice(key.length).replace(/^\./, '')];
    }
  }
  return ['', ''];
}

/** Errors by form field, and those above the button. */
export function errorPlaces(
  violations: { field: string; description: string }[],
  message: string,
  table: Record<string, string>
): { inline: Record<string, string[]>; above: string[] } {
  const inline: Record<string, string[]> = {};
  const above: string[] = [];
  if (!violations.length) {
    return { inline, above: [message] };
  }
  for (const v of violations) {
    const [field, inside] = fieldOf(v.field, table);
    if (field) {
      (inline[field] ??= []).push(inside ? `${inside}: ${v.description}` : v.description);
    } else {
      above.push(`${v.field}: ${v.description}`);
    }
  }
  return { inline, above };
}

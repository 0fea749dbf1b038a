import { describe, expect, it } from 'vitest';

import { emptyValues, errorPlaces, fieldOf, valuesForPath } from '../src/submitvalues';

// a part of the server's table (server_ext/widgets/form.py _FIELDS), as GET …/submitForm serves it
const TABLE = {
  jobId: 'job_id',
  'trainingInput.args': 'args',
  'trainingInput.hyperparameters': 'hyperparameters',
  package: 'package_path',
  'package.path': 'package_path',
  'trainingInput.masterConfig.acceleratorConfig': 'accelerator'
};

describe('valuesForPath', () => {
  it.each([
    ['trainer/trainer/task.py', { package_path: 'trainer/trainer', module: 'trainer.task' }],
    ['a/b/pkg/run.py', { package_path: 'a/b/pkg', module: 'pkg.run' }],
    ['work/train.ipynb', { package_path: 'work' }],
    ['top.py', {}],
    ['', {}]
  ])('%s → %j', (path, values) => {
    expect(valuesForPath(path)).toEqual(values);
  });
});

describe('fieldOf', () => {
  it.each([
    ['trainingInput.args', ['args', '']],
    ['trainingInput.hyperparameters.params[1].minValue', ['hyperparameters', 'params[1].minValue']],
    ['package.path', ['package_path', '']],
    ['package', ['package_path', '']],
    ['trainingInput.masterConfig.acceleratorConfig.count', ['accelerator', 'count']],
    ['trainingInput.argsX', ['', '']],
    ['project', ['', '']]
  ])('%s → %j', (field, place) => {
    expect(fieldOf(field, TABLE)).toEqual(place);
  });
});

describe('errorPlaces', () => {
  it('puts each violation next to its field, the rest above the button', () => {
    const places = errorPlaces(
      [
        { field: 'package.path', description: "'x' is not a directory" },
        { field: 'trainingInput.hyperparameters.goal', description: 'must be MAXIMIZE or MINIMIZE' },
        { field: 'project', description: 'not yours' }
      ],
      'bad',
      TABLE
    );
    expect(places).toEqual({
      inline: { package_path: ["'x' is not a directory"], hyperparameters: ['goal: must be MAXIMIZE or MINIMIZE'] },
      above: ['project: not yours']
    });
    expect(errorPlaces([], 'the hub is down', TABLE)).toEqual({ inline: {}, above: ['the hub is down'] });
  });

  it('starts from the widget defaults', () => {
    expect(emptyValues('demo')).toMatchObject({ scale_tier: 'BASIC', accelerator_count: 1, project: 'demo' });
  });
});

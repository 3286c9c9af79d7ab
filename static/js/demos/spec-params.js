// A demo's parameters as its page embeds them: `config.spec` is the catalog's own spec (`DemoSpec.describe()` from
// demos/catalog/<name>.py, embedded by demos/embed.py) and `config.params` the page's validated params (every
// default filled in). Demo scripts read defaults, limits and choices from here and never repeat them as literals,
// so the catalog is the one place a default or a limit is set.
//   const sp = specParams(config);
//   numberField("Batch size", sp.value("batch_size"), sp.range("batch_size", { step: 1 }));

export function specParams(config = {}) {
  const params = (config.spec && config.spec.params) || {};
  const given = config.params || {};

  /** The parameter's description: {kind, label, default, min, max, choices, limits, …}. */
  function param(key) {
    const p = params[key];
    if (!p) throw new Error(`The page's demo spec has no parameter "${key}".`);
    return p;
  }

  return {
    param,
    /** The value to show first: the page's params (a lesson may set them), else the catalog's default. */
    value: (key) => given[key] ?? param(key).default,
    /** The catalog's default. */
    default: (key) => param(key).default,
    min: (key) => param(key).min,
    max: (key) => param(key).max,
    /** numberField options: the parameter's min and max, plus `extra` (step, help). */
    range: (key, extra = {}) => ({ min: param(key).min, max: param(key).max, ...extra }),
    /** selectField options [[value, text]]; `labels` may name a choice for people. */
    choices: (key, labels = {}) => (param(key).choices || []).map((c) => [String(c), labels[c] ?? String(c)]),
    /** A structural limit a check enforces (e.g. a workload's most requests): `limits` in the spec. */
    limit: (key, name) => {
      const value = (param(key).limits || {})[name];
      if (value === undefined) throw new Error(`The page's demo spec has no limit "${name}" for "${key}".`);
      return value;
    },
  };
}

"""The house rules a newcomer relies on, read from the source with `ast`:
imports point down the layers (`LAYERS`: core, spec, model, search,
calibration, boundary, studies, api; no cycles; the library never imports
the launchers), the package holds only the layers, tests mirror the tree,
no module uses another's private names, functions stay short (the few
long ones listed, at most MAX_ALLOWED, a list that only shrinks) and
launchers thin."""

import ast
import pathlib

ROOT = pathlib.Path(__file__).resolve().parent.parent
PACKAGE = ROOT / 'codesign'
MAX_FUNCTION_LINES = 60
MAX_MAIN_LINES = 40
# The facade re-exports the API (which runs the studies); it is not a layer.
FACADE = 'codesign'
# Subpackages in layer order: each imports only those before it (and
# itself); `api` is the module on top.
LAYERS = (
  'core',
  'spec',
  'model',
  'search',
  'calibration',
  'boundary',
  'studies',
  'api',
)
# Functions over MAX_FUNCTION_LINES lines of code, each to be cut into
# named stages or phases; the list may only shrink, and holds at most
# MAX_ALLOWED.
MAX_ALLOWED = 5
LONG_FUNCTIONS = frozenset(
  {
    'search/gradient:gradient_search',
    'calibration/public_cases:_fit_parameters',
  }
)


def _module_name(path: pathlib.Path) -> str:
  parts = path.relative_to(ROOT).with_suffix('').parts
  return '.'.join(parts[:-1] if parts[-1] == '__init__' else parts)


def _modules(top: pathlib.Path) -> dict[str, pathlib.Path]:
  return {_module_name(p): p for p in sorted(top.rglob('*.py'))}


MODULES = _modules(PACKAGE)


def _resolve(name: str) -> str | None:
  """The codesign module that an imported dotted name refers to."""
  while name and name not in MODULES:
    name = name.rpartition('.')[0]
  return name or None


def _imports(path: pathlib.Path) -> list[tuple[str, str | None]]:
  """(imported module, alias bound or None) for every import in the file,
  at module level or inside functions."""
  out = []
  tree = ast.parse(path.read_text())
  package = _module_name(path) if path.is_relative_to(ROOT) else ''
  if path.name != '__init__.py':
    package = package.rpartition('.')[0]
  for node in ast.walk(tree):
    if isinstance(node, ast.Import):
      for a in node.names:
        out.append((a.name, a.asname))
    elif isinstance(node, ast.ImportFrom):
      base = node.module or ''
      if node.level:
        parent = package.split('.')[: len(package.split('.')) - node.level + 1]
        base = '.'.join(parent + ([base] if base else []))
      for a in node.names:
        full = f'{base}.{a.name}'
        # `from codesign import terms` imports a module; `from
        # codesign.smooth import TINY` a name of one.
        out.append((full if full in MODULES else base, a.asname or a.name))
  return out


def _graph() -> dict[str, set[str]]:
  graph = {}
  for name, path in MODULES.items():
    deps = set()
    for imported, _ in _imports(path):
      target = _resolve(imported) if imported.startswith('codesign') else None
      if target and target not in (name, FACADE):
        deps.add(target)
    graph[name] = deps
  return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
  """Strongly connected components with more than one module (Tarjan)."""
  index, low, stack, on, out = {}, {}, [], set(), []

  def visit(v):
    index[v] = low[v] = len(index)
    stack.append(v)
    on.add(v)
    for w in sorted(graph.get(v, ())):
      if w not in index:
        visit(w)
        low[v] = min(low[v], low[w])
      elif w in on:
        low[v] = min(low[v], index[w])
    if low[v] == index[v]:
      comp = []
      while True:
        w = stack.pop()
        on.discard(w)
        comp.append(w)
        if w == v:
          break
      if len(comp) > 1:
        out.append(sorted(comp))

  for v in sorted(graph):
    if v not in index:
      visit(v)
  return out


def test_the_cycle_finder_finds_a_planted_cycle():
  graph = {'a': {'b'}, 'b': {'c'}, 'c': {'a'}, 'd': {'a'}}
  assert _cycles(graph) == [['a', 'b', 'c']]
  assert _cycles({'a': {'b'}, 'b': set()}) == []


def test_no_import_cycles_among_codesign_modules():
  graph = _graph()
  assert len(graph) > 30 and graph['codesign.model.cost_model']  # read them
  assert _cycles(graph) == []


def _layer(module: str) -> int | None:
  """Index in LAYERS of a codesign module; None for the facade."""
  if module == FACADE:
    return None
  part = module.split('.')[1]
  return LAYERS.index(part) if part in LAYERS else len(LAYERS)


def _layer_problems(modules: dict[str, pathlib.Path]) -> list[str]:
  """Imports that point up the layers, or out to the launchers."""
  problems = []
  for name, path in modules.items():
    for imported, _ in _imports(path):
      if imported.split('.')[0] == 'experiments':
        problems.append(f'{name} imports the launcher {imported}')
      target = _resolve(imported) if imported.startswith('codesign') else None
      if target is None or target == FACADE or name == FACADE:
        continue
      if _layer(target) > _layer(name):
        problems.append(f'{name} imports {target}, a layer above it')
  return problems


def test_layers_point_down():
  assert not _layer_problems(MODULES)


def test_a_planted_upward_import_is_found(tmp_path):
  low = tmp_path / 'x.py'
  low.write_text('from codesign.studies import proposal\n')
  ok = tmp_path / 'y.py'
  ok.write_text('from codesign.core import smooth\n')
  problems = _layer_problems({'codesign.spec.x': low, 'codesign.model.y': ok})
  assert problems == [
    'codesign.spec.x imports codesign.studies.proposal, a layer above it'
  ]


def test_the_package_holds_only_the_layers_the_facade_and_data():
  names = {p.name for p in PACKAGE.iterdir() if p.name != '__pycache__'}
  assert names == {'__init__.py', 'api.py', 'data', *LAYERS[:-1]}


def test_tests_mirror_the_tree():
  folders = {
    str(p.relative_to(ROOT / 'tests'))
    for p in (ROOT / 'tests').rglob('*')
    if p.is_dir() and p.name != '__pycache__'
  }
  assert folders <= {*LAYERS[:-1], 'model/terms'}, folders
  for folder in folders:
    assert (PACKAGE / folder).is_dir(), folder


def _private_uses(path: pathlib.Path) -> list[str]:
  aliases = {
    alias: imported
    for imported, alias in _imports(path)
    if alias and imported.startswith('codesign') and imported in MODULES
  }
  tree = ast.parse(path.read_text())
  found = []
  for node in ast.walk(tree):
    if (
      isinstance(node, ast.Attribute)
      and isinstance(node.value, ast.Name)
      and node.value.id in aliases
      and node.attr.startswith('_')
      and not node.attr.startswith('__')
    ):
      found.append(f'{aliases[node.value.id]}.{node.attr}')
    if isinstance(node, ast.ImportFrom) and (node.module or '').startswith(
      'codesign'
    ):
      found += [
        f'{node.module}.{a.name}'
        for a in node.names
        if a.name.startswith('_') and not a.name.startswith('__')
      ]
  return found


def test_no_module_uses_another_modules_private_names():
  files = {**MODULES, **_modules(ROOT / 'experiments')}
  files.update(_modules(ROOT / 'tests'))
  used = {
    name: uses for name, path in files.items() if (uses := _private_uses(path))
  }
  assert not used, used


def test_private_use_checker_sees_attribute_and_from_imports(tmp_path):
  f = tmp_path / 'x.py'
  f.write_text(
    'from codesign.calibration import dlrm\n'
    'from codesign.core.smooth import _power\n'
    'dlrm._mlp(1)\ndlrm.public(2)\n'
  )
  assert sorted(_private_uses(f)) == [
    'codesign.calibration.dlrm._mlp',
    'codesign.core.smooth._power',
  ]


def _code_lines(lines: list[str], node: ast.AST) -> int:
  """Lines of a function that hold code: no docstring, blank or comment
  lines."""
  skip = set()
  first = node.body[0]
  if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
    skip = set(range(first.lineno, first.end_lineno + 1))
  return sum(
    1
    for i in range(node.lineno, node.end_lineno + 1)
    if i not in skip
    and lines[i - 1].strip()
    and not lines[i - 1].strip().startswith('#')
  )


def _long_functions(paths: list[pathlib.Path]) -> dict[str, int]:
  """'file:function' -> lines of code, for functions over the limit."""
  long = {}
  for path in paths:
    text = path.read_text()
    lines = text.splitlines()
    for node in ast.walk(ast.parse(text)):
      if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
        n = _code_lines(lines, node)
        if n > MAX_FUNCTION_LINES:
          long[f'{_short(path)}:{node.name}'] = n
  return long


def _short(path: pathlib.Path) -> str:
  try:
    return str(path.relative_to(PACKAGE).with_suffix(''))
  except ValueError:
    return path.stem


def test_functions_stay_short():
  long = _long_functions(sorted(PACKAGE.rglob('*.py')))
  assert set(long) <= LONG_FUNCTIONS, sorted(set(long) - LONG_FUNCTIONS)


def test_the_long_function_allowlist_is_short():
  assert len(LONG_FUNCTIONS) <= MAX_ALLOWED


def test_the_long_function_allowlist_only_shrinks():
  # An entry that is short now must leave the list.
  long = _long_functions(sorted(PACKAGE.rglob('*.py')))
  assert LONG_FUNCTIONS <= set(long), sorted(LONG_FUNCTIONS - set(long))


def test_a_planted_long_function_is_found(tmp_path):
  body = ''.join(f'  x{i} = {i}\n' for i in range(99))
  f = tmp_path / 'planted.py'
  f.write_text(f'def planted():\n  """Doc."""\n  # why\n\n{body}')
  assert _long_functions([f]) == {'planted:planted': 100}


def test_launchers_are_thin():
  long = {}
  for p in sorted((ROOT / 'experiments').glob('*.py')):
    for node in ast.parse(p.read_text()).body:
      if isinstance(node, ast.FunctionDef) and node.name == 'main':
        n = node.end_lineno - node.lineno + 1
        if n > MAX_MAIN_LINES:
          long[p.name] = n
  assert not long, long

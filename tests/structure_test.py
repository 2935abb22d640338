"""The house rules a newcomer relies on, read from the source with `ast`:
imports go one way (no cycles among codesign's modules; the library never
imports the launchers; the studies sit on top), no module uses another's
private names, modules stay small and launchers thin."""

import ast
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
PACKAGE = ROOT / 'codesign'
MAX_MODULE_LINES = 600
MAX_MAIN_LINES = 40
# The facade re-exports the API (which runs the studies); it is not a layer.
FACADE = 'codesign'


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
  assert len(graph) > 30 and graph['codesign.cost_model']  # it read them
  assert _cycles(graph) == []


def test_layers_point_one_way():
  graph = _graph()
  problems = []
  for name, path in MODULES.items():
    for imported, _ in _imports(path):
      if imported.split('.')[0] == 'experiments':
        problems.append(f'{name} imports the launcher {imported}')
    studies = {d for d in graph[name] if d.startswith('codesign.studies')}
    if studies and not name.startswith(('codesign.studies', 'codesign.api')):
      problems.append(f'{name} imports the studies {sorted(studies)}')
  # The data layer knows nothing of the model, the planner or the search.
  for low in ('codesign.workload', 'codesign.hardware', 'codesign.plan'):
    high = graph[low] & {
      'codesign.cost_model',
      'codesign.planner',
      'codesign.search',
      'codesign.design_space',
    }
    if high:
      problems.append(f'{low} imports {sorted(high)}')
  assert not problems, problems


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
    'from codesign import dlrm\nfrom codesign.smooth import _power\n'
    'dlrm._mlp(1)\ndlrm.public(2)\n'
  )
  assert sorted(_private_uses(f)) == [
    'codesign.dlrm._mlp',
    'codesign.smooth._power',
  ]


@pytest.mark.parametrize('top', ['codesign', 'experiments'])
def test_modules_stay_small(top):
  long = {
    str(p.relative_to(ROOT)): n
    for p in sorted((ROOT / top).rglob('*.py'))
    if (n := len(p.read_text().splitlines())) > MAX_MODULE_LINES
  }
  assert not long, long


def test_launchers_are_thin():
  long = {}
  for p in sorted((ROOT / 'experiments').glob('*.py')):
    for node in ast.parse(p.read_text()).body:
      if isinstance(node, ast.FunctionDef) and node.name == 'main':
        n = node.end_lineno - node.lineno + 1
        if n > MAX_MAIN_LINES:
          long[p.name] = n
  assert not long, long

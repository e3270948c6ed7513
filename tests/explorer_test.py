#!/usr/bin/python3
"""Browser test of the web explorer (docs/operations.md, "Web explorer"): headless Chromium driven
by Selenium against a real local cluster with the HTTP API.

Default mode: generates a small graph (`zipg gen graph`, a hot node with a long edge record),
compresses it, starts `zipg local start --replicas 2 --logstores 2 --http` and, on the page of
the first aggregator:
  load        the page loads without an error, cytoscape is there
  search      exact (get_node_ids) and value searches (search_node_ids: prefix in one property,
              contains in any): the ids listed equal the reference's
  node        the node with the longest edge record: its properties; its edge records of types
              0..15 with count, newest and oldest timestamps; a type typed in (no edges: count 0);
              a node without an entry says so
  paging      that record's edges, 50 a page: next, next, previous, each page as the reference's
  neighbours  the drawn ids (read from window.explorer.cy) are the node and its out-neighbours;
              a click on a neighbour adds its out-neighbours; 2 hops draw at most 200 nodes, all
              within 2 hops; a double-click opens the node's view
  traverse    an rpq (its pairs) and a bfs (its ids and depths) as the reference computes them
  error       a malformed rpq shows INVALID_ARGUMENT with the position in the banner
  cluster     every member, its role and state, every shard served by 2 replicas, the LogStore
              leader and standby, calls/s; then kill -9 of one shard-server replica (a pid from
              /v1/status): the page shows it down and every shard still served; a node still opens
The reference is the generated CSV files read in Python (graph_model.load_model / Model), never
the server. A screenshot of every step goes to the output directory.

Usage: explorer_test.py PATH/TO/zipg [--out DIR]
       explorer_test.py --url http://HOST:PORT/ --data DIR [--out DIR]
           (a server already running, e.g. a development mock, whose store was built from
            DIR/nodes.csv and DIR/edges.csv; the kill step is skipped)
Needs a Python with selenium (scripts/setup.sh makes .venv with it; the suite runs .venv/bin/python),
/usr/bin/chromium and /usr/bin/chromedriver (Debian chromium, chromium-driver); fails (exit 1)
without them. Exit status 0 if every check passed."""
import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections import Counter

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cluster_procs  # noqa: E402
from graph_model import Model, load_model  # noqa: E402

try:
    from selenium import webdriver
    from selenium.common.exceptions import TimeoutException, WebDriverException
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys
    from selenium.webdriver.support.ui import Select, WebDriverWait
except ImportError:
    print("explorer_test: FAILED: this Python has no selenium (scripts/setup.sh makes .venv with it; "
          "or python3 -m venv V && V/bin/pip install selenium; run it with V/bin/python)")
    sys.exit(1)

WAIT = 15           # seconds: any one wait of the page
KILL_WAIT = 25      # seconds: the cluster page shows a killed replica down
DEADLINE = 150      # seconds: the whole test
MAX_DRAWN = 200     # the explorer draws at most this many nodes
PAGE = 50           # edges per page
PROBE_TYPES = 16


class StepFailed(Exception):
    pass


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("zipg", nargs="?", help="the zipg binary (default mode)")
    ap.add_argument("--url", help="test this running server instead of starting a cluster")
    ap.add_argument("--data", help="with --url: the directory of the nodes.csv and edges.csv "
                                   "its store was built from")
    ap.add_argument("--out", help="directory for the screenshots (default: a new temp dir)")
    ap.add_argument("--chromium", default="/usr/bin/chromium")
    ap.add_argument("--chromedriver", default="/usr/bin/chromedriver")
    a = ap.parse_args()
    if bool(a.url) == bool(a.zipg) or (a.url and not a.data):
        ap.print_usage()
        print(__doc__)
        sys.exit(2)
    for path in (a.chromium, a.chromedriver):
        if not os.path.exists(path):
            print(f"explorer_test: FAILED: {path} is missing (scripts/setup.sh installs chromium "
                  "chromium-driver)")
            sys.exit(1)
    return a


ARGS = parse_args()
report = cluster_procs.Report(max_printed=80)
check, section, note = report.check, report.section, report.note
OUT = ARGS.out or tempfile.mkdtemp(prefix="zipg-explorer-shots-")
os.makedirs(OUT, exist_ok=True)
driver = None
shot_no = 0


# ------------------------------------------------------------------------------------------------
# The browser
def start_browser():
    opts = Options()
    opts.binary_location = ARGS.chromium
    for flag in ["--headless=new", "--disable-gpu", "--disable-dev-shm-usage", "--hide-scrollbars",
                 "--window-size=1400,1100", "--force-device-scale-factor=1",
                 "--disable-extensions", "--no-first-run", "--lang=en-US"]:
        opts.add_argument(flag)
    if os.geteuid() == 0:
        opts.add_argument("--no-sandbox")  # Chromium refuses to run as root with its sandbox
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    d = webdriver.Chrome(service=Service(ARGS.chromedriver), options=opts)
    d.set_page_load_timeout(WAIT)
    d.set_script_timeout(WAIT)
    return d


def js(script, *args):
    return driver.execute_script(script, *args)


def by(testid):
    return driver.find_element(By.CSS_SELECTOR, f'[data-testid="{testid}"]')


def shot(name):
    global shot_no
    shot_no += 1
    path = os.path.join(OUT, f"{shot_no:02d}-{name}.png")
    try:
        driver.save_screenshot(path)
    except WebDriverException as e:
        note(f"screenshot {name} failed: {e.msg}")


def wait_for(cond, what, timeout=WAIT):
    """Waits until cond() is truthy; a timeout fails the step (with a screenshot)."""
    try:
        return WebDriverWait(driver, timeout, poll_frequency=0.05).until(lambda _d: cond())
    except TimeoutException:
        shot("timeout")
        raise StepFailed(f"timed out after {timeout} s waiting for {what}")


def done_count():
    return int(js("return Number(document.body.dataset.done || 0)"))


def act(fn, what, actions=1, until=None, timeout=WAIT):
    """Runs fn() (a click, a submit) and waits until `actions` more page actions finished, none
    runs, and until() holds."""
    before = done_count()
    fn()
    wait_for(lambda: done_count() >= before + actions and
             js("return document.body.dataset.busy") == "0" and (until is None or until()),
             what, timeout)


def banner():
    """The errors shown in the banner: [(code, message)], [] when it is hidden."""
    return js("""const b = document.getElementById('banner');
                 if (b.hidden) return [];
                 return [...b.querySelectorAll('[data-testid=error]')].map(
                     li => [li.querySelector('.error-code').textContent,
                            li.querySelector('.error-message').textContent]);""")


def no_errors(step):
    errs = banner()
    check(not errs, f"{step}: the banner shows errors: {errs}")


def navigate(hash_, until, what):
    js("location.hash = arguments[0]", hash_)
    wait_for(lambda: js("return document.body.dataset.busy") == "0" and until(), what)


def fill(testid, text):
    e = by(testid)
    e.clear()
    e.send_keys(text)


def rows(table_testid, *attrs):
    """The data-* attributes of a table's body rows, as lists of strings."""
    return js("""const [id, attrs] = arguments;
                 return [...document.querySelectorAll(`[data-testid="${id}"] tbody tr`)]
                     .filter(r => r.dataset[attrs[0]] !== undefined)
                     .map(r => attrs.map(a => r.dataset[a]));""", table_testid, list(attrs))


def drawn(which="cy"):
    return js(f"return window.explorer.{which} ? window.explorer.{which}.nodes().map(n => n.id()) : []")


def click_node(node_id, double=False):
    """A real mouse click (or double-click) on a drawn node, at its rendered position."""
    pos = js("""const cy = window.explorer.cy, n = cy.getElementById(arguments[0]);
                if (n.empty()) return null;
                n.scratch('_test', 1);
                const p = n.renderedPosition(), r = cy.container().getBoundingClientRect();
                cy.container().scrollIntoView({block: 'center'});
                return [p.x, p.y, r.width, r.height];""", str(node_id))
    if pos is None:
        raise StepFailed(f"node {node_id} is not drawn")
    x, y, w, h = pos
    chain = ActionChains(driver).move_to_element_with_offset(by("neighbourhood"), int(x - w / 2),
                                                            int(y - h / 2))
    (chain.double_click() if double else chain.click()).perform()


# ------------------------------------------------------------------------------------------------
# The reference, from the CSV files
class Reference:
    def __init__(self, data_dir):
        self.nodes, self.records = load_model(os.path.join(data_dir, "nodes.csv"),
                                              os.path.join(data_dir, "edges.csv"))
        self.model = Model(self.nodes, self.records)
        self.out = {}
        for (s, _t), edges in self.records.items():
            self.out.setdefault(s, set()).update(e["dst"] for e in edges)

    def neighbors(self, i):
        return self.out.get(i, set())

    def exact_pair(self):
        """A (property, value) that 2..40 nodes have: the most common such pair."""
        c = Counter((p, v) for n in self.nodes.values() for p, v in n.items())
        return max((k for k, n in c.items() if 2 <= n <= 40), key=lambda k: (c[k], k))

    def prefix_search(self):
        """(property, 4-byte prefix) that 3..60 nodes' values of that property start with."""
        c = Counter()
        for n in self.nodes.values():
            for p, v in n.items():
                if len(v) >= 4 and v[:4].isalpha():
                    c[(p, v[:4])] += 1
        return max((k for k, n in c.items() if 3 <= n <= 60), key=lambda k: (c[k], k))

    def contains_pattern(self):
        """A word of 5+ letters of one node's values that 2..100 nodes contain (any property)."""
        words = sorted({w for n in list(self.nodes.values())[:3] for v in n.values()
                        for w in v.split() if len(w) >= 5 and w.isalpha()})
        for w in words:
            k = len(self.model.search({"pattern": w})["ok"]["ids"])
            if 2 <= k <= 100:
                return w
        return words[0]

    def busiest_node(self):
        """The node with the longest edge record of a type 0..15 (then the smallest id)."""
        best = max(((len(e), -s) for (s, t), e in self.records.items()
                    if s in self.nodes and 0 <= t < PROBE_TYPES), default=None)
        return -best[1]

    def neighbourhood_node(self):
        """A node to draw: the most out-neighbours, at most 120 (so that a click on one of them
        adds nodes below the cap of 200), then the smallest id."""
        return -max((len(self.neighbors(i)), -i) for i in self.nodes
                    if len(self.neighbors(i)) <= 120)[1]

    def edge_records(self, i):
        """{type: (count, newest, oldest)} of node i's records of types 0..15 with edges."""
        return {t: (len(e), e[0]["timestamp"], e[-1]["timestamp"])
                for (s, t), e in self.records.items() if s == i and 0 <= t < PROBE_TYPES and e}


# ------------------------------------------------------------------------------------------------
# The steps
def step_load(url):
    driver.get(url)
    wait_for(lambda: js("return !!(window.explorer && window.explorer.ready)"), "the page script")
    wait_for(lambda: js("return document.body.dataset.view") == "search", "the search view")
    check(js("return typeof window.cytoscape") == "function", "cytoscape is not loaded")
    check("zipg" in driver.title, f"title {driver.title!r}")
    # The property names for the search forms come from GET /v1/status.
    wait_for(lambda: js("return document.querySelectorAll('#property-names option').length") > 0
             or banner(), "the property names (or an error)")
    no_errors("load")
    shot("load")


def step_search(ref):
    navigate("#search", lambda: by("view-search").is_displayed(), "the search view")
    prop, value = ref.exact_pair()
    want = sorted(i for i, n in ref.nodes.items() if n.get(prop) == value)
    fill("exact-name", prop)
    fill("exact-value", value)
    act(lambda: by("exact-run").click(), "the exact search")
    got = [int(r[0]) for r in rows("search-results", "id")]
    check(got == want, f"exact search {prop}={value!r}: listed {got}, reference {want}")
    note(f"exact {prop} = {value!r}: {len(got)} ids")
    no_errors("exact search")
    shot("search-exact")

    prop, prefix = ref.prefix_search()
    want = ref.model.search({"pattern": prefix, "property": prop, "match": "prefix",
                             "limit": 1000})["ok"]
    fill("value-pattern", prefix)
    Select(by("value-match")).select_by_visible_text("prefix")
    fill("value-property", prop)
    act(lambda: by("value-run").click(), "the prefix search")
    got = [int(r[0]) for r in rows("search-results", "id")]
    check(got == want["ids"], f"prefix search {prefix!r} in {prop}: listed {got}, reference "
                              f"{want['ids']}")
    check(by("search-summary").text.startswith(f"{len(want['ids'])} node"),
          f"summary {by('search-summary').text!r}")
    note(f"prefix {prefix!r} in {prop}: {len(got)} ids")
    no_errors("prefix search")
    shot("search-prefix")

    pattern = ref.contains_pattern()
    want = ref.model.search({"pattern": pattern, "limit": 1000})["ok"]
    fill("value-pattern", pattern)
    Select(by("value-match")).select_by_visible_text("contains")
    by("value-property").clear()
    act(lambda: by("value-run").click(), "the contains search")
    got = [int(r[0]) for r in rows("search-results", "id")]
    check(got == want["ids"], f"contains {pattern!r}: listed {got}, reference {want['ids']}")
    note(f"contains {pattern!r} in any property: {len(got)} ids")
    no_errors("contains search")
    shot("search-contains")


def node_props():
    return js("""return Object.fromEntries([...document.querySelectorAll(
                   '[data-testid=node-props] tr[data-prop]')].map(
                   r => [r.dataset.prop, r.querySelector('td').textContent]));""")


def open_node_by_form(i):
    fill("goto-id", str(i))
    act(lambda: by("goto-id").send_keys(Keys.ENTER), f"node {i}", actions=2,
        until=lambda: by("node-id").text == str(i))


def step_node(ref, i):
    open_node_by_form(i)
    props = node_props()
    check(props == ref.nodes[i], f"node {i}: properties {props}, reference {ref.nodes[i]}")
    got = {int(t): (int(c), int(n), int(o))
           for t, c, n, o in js("""return [...document.querySelectorAll(
               '[data-testid=edge-records] tbody tr[data-type]')].map(r => [r.dataset.type,
               r.dataset.count, r.querySelector('td.newest').dataset.ts,
               r.querySelector('td.oldest').dataset.ts]);""")}
    want = ref.edge_records(i)
    check(got == want, f"node {i}: edge records (count, newest, oldest) {got}, reference {want}")
    note(f"node {i}: {len(props)} properties, records {want}")
    no_errors("node")
    shot("node")

    extra = next(t for t in range(PROBE_TYPES, 1000) if (i, t) not in ref.records)
    fill("add-type", str(extra))
    act(lambda: by("add-type").send_keys(Keys.ENTER), f"type {extra} added")
    got = rows("edge-records", "type", "count")
    check([str(extra), "0"] in got, f"added type {extra}: rows {got}")
    no_errors("add type")

    missing = max(ref.model.live_ids()) + 12345
    navigate(f"#node/{missing}", lambda: by("node-id").text == str(missing), "a missing node")
    check(by("node-missing").is_displayed(), f"node {missing}: 'no node entry' not shown")
    check(node_props() == {}, f"node {missing}: properties shown")
    no_errors("missing node")


def edge_page():
    return [(int(d), int(t)) for d, t in rows("edge-list", "dst", "ts")]


def step_paging(ref, i):
    navigate(f"#node/{i}", lambda: by("node-id").text == str(i) and
             len(rows("edge-records", "type")) > 0, f"node {i}")
    t = max(ref.edge_records(i), key=lambda k: (ref.edge_records(i)[k][0], -k))
    record = [(e["dst"], e["timestamp"]) for e in ref.records[(i, t)]]
    pages = (len(record) + PAGE - 1) // PAGE
    button = driver.find_element(
        By.CSS_SELECTOR, f'[data-testid=edge-records] tr[data-type="{t}"] [data-testid=open-edges]')
    act(button.click, f"edges of type {t}")
    check(edge_page() == record[:PAGE], f"type {t} page 1: {edge_page()[:5]}..., reference "
                                        f"{record[:5]}...")
    check(f"of {len(record)}" in by("edge-page-info").text, f"info {by('edge-page-info').text!r}")
    check(not by("edge-prev").is_enabled(), "page 1: previous is enabled")
    no_errors("paging")
    shot("edges-page-1")
    for p in range(1, min(pages, 3)):
        act(by("edge-next").click, f"page {p + 1}")
        check(edge_page() == record[p * PAGE:(p + 1) * PAGE], f"type {t} page {p + 1}: "
              f"{edge_page()[:5]}..., reference {record[p * PAGE:p * PAGE + 5]}...")
        shot(f"edges-page-{p + 1}")
    check(not by("edge-next").is_enabled() or pages > 3, "last page: next is enabled")
    if pages > 1:
        shown = min(pages, 3)
        act(by("edge-prev").click, "previous page")
        check(edge_page() == record[(shown - 2) * PAGE:(shown - 1) * PAGE],
              f"previous: page {shown - 1} not shown")
    note(f"node {i} type {t}: {len(record)} edges, {pages} page(s)")
    no_errors("paging")


def step_neighbourhood(ref, i):
    navigate(f"#node/{i}", lambda: by("node-id").text == str(i), f"node {i}")
    one_hop = {i} | ref.neighbors(i)
    got = set(map(int, drawn()))
    if len(one_hop) <= MAX_DRAWN:
        check(got == one_hop, f"1 hop of {i}: drawn {sorted(got)}, reference {sorted(one_hop)}")
    else:
        check(len(got) == MAX_DRAWN and got <= one_hop, f"1 hop of {i}: {len(got)} drawn")
    note(f"1 hop: {len(got)} nodes drawn")
    shot("neighbourhood-1-hop")

    # Expand the neighbour that adds the most nodes without reaching the cap.
    choices = sorted((len(ref.neighbors(n) - got), -n) for n in got - {i}
                     if len(got | ref.neighbors(n)) <= MAX_DRAWN)
    if choices and choices[-1][0] > 0:
        n = -choices[-1][1]
        act(lambda: click_node(n), f"expanding {n}")
        after = set(map(int, drawn()))
        check(after == got | ref.neighbors(n),
              f"expand {n}: drawn {sorted(after - got)} new, reference {sorted(ref.neighbors(n) - got)}")
        check(js("return window.explorer.cy.getElementById(arguments[0]).hasClass('expanded')",
                 str(n)), f"node {n} is not marked expanded")
        note(f"clicked {n}: {len(after) - len(got)} nodes added")
        shot("neighbourhood-expanded")
    else:
        check(False, f"no neighbour of {i} to expand")
        n = None

    two_hops = set(one_hop)
    for m in ref.neighbors(i):
        two_hops |= ref.neighbors(m)
    act(lambda: Select(by("hops")).select_by_value("2"), "2 hops")
    got2 = set(map(int, drawn()))
    check(len(got2) == min(MAX_DRAWN, len(two_hops)) and got2 <= two_hops,
          f"2 hops of {i}: {len(got2)} drawn (reference {len(two_hops)} within 2 hops, "
          f"outside: {sorted(got2 - two_hops)[:10]})")
    if len(one_hop) <= MAX_DRAWN:
        check(one_hop <= got2, f"2 hops: 1-hop nodes missing {sorted(one_hop - got2)[:10]}")
    if len(two_hops) > MAX_DRAWN:
        check("not drawn" in by("cy-info").text, f"the cap is not said: {by('cy-info').text!r}")
    note(f"2 hops: {len(got2)} of {len(two_hops)} drawn")
    no_errors("neighbourhood")
    shot("neighbourhood-2-hops")
    Select(by("hops")).select_by_value("1")
    wait_for(lambda: js("return document.body.dataset.busy") == "0", "1 hop again")

    if n is not None:
        # A double-click on a drawn node opens its view.
        act(lambda: click_node(n, double=True), f"double-click on {n}",
            until=lambda: by("node-id").text == str(n))
        check(js("return location.hash") == f"#node/{n}", f"hash {js('return location.hash')}")
        check(node_props() == ref.nodes.get(n, {}), f"node {n} (double-click): properties")
        no_errors("double-click")
        shot("node-by-double-click")


def traverse_form(kind):
    navigate("#traverse", lambda: by("view-traverse").is_displayed(), "the traverse view")
    by(f"kind-{kind}").click()


def step_traverse(ref, i):
    # rpq: a concatenation, an alternation and a star, from a few sources.
    sources = sorted(set(sorted(s for s in ref.nodes if ref.neighbors(s))[:4]) | {i})
    expr = None
    for e in ["1/(0|2)*", "(0|1)/2?", "_/3", "_"]:
        want = ref.model.rpq({"expr": e, "sources": sources, "limit": 1000})["ok"]
        if 1 <= len(want["pairs"]) <= 600:
            expr = e
            break
    traverse_form("rpq")
    fill("rpq-expr", expr)
    fill("rpq-sources", ",".join(map(str, sources)))
    act(lambda: by("traverse-run").click(), "the rpq")
    got = [[int(s), int(d)] for s, d in rows("traverse-table", "src", "dst")]
    check(got == want["pairs"], f"rpq {expr} from {sources}: {len(got)} pairs listed, reference "
                                f"{len(want['pairs'])}; first differences "
                                f"{[p for p in got if p not in want['pairs']][:5]} / "
                                f"{[p for p in want['pairs'] if p not in got][:5]}")
    check(js("return document.querySelector('[data-testid=traverse-table]').dataset.truncated")
          == str(want["truncated"]).lower(), "rpq: truncated flag")
    ids = {x for p in want["pairs"] for x in p}
    n_drawn = len(drawn("traverseCy"))
    check(n_drawn == len(ids) if len(ids) <= MAX_DRAWN else n_drawn <= MAX_DRAWN,
          f"rpq drawing: {n_drawn} nodes, {len(ids)} ids in the pairs")
    note(f"rpq {expr} from {sources}: {len(got)} pairs, {n_drawn} nodes drawn")
    no_errors("rpq")
    shot("rpq")

    # bfs: from the source whose 2 hops are nearest 100 nodes.
    start = min(sources, key=lambda s: (abs(len(ref.model.bfs_depths({"id": s, "max_depth": 2}))
                                            - 100), s))
    want = ref.model.bfs({"id": start, "max_depth": 2, "limit": 1000})["ok"]
    traverse_form("bfs")
    fill("bfs-id", str(start))
    fill("bfs-depth", "2")
    by("bfs-types").clear()
    act(lambda: by("traverse-run").click(), "the bfs")
    got = [{"id": int(a), "depth": int(d)} for a, d in rows("traverse-table", "id", "depth")]
    check(got == want, f"bfs from {start}: {len(got)} entries listed, reference {len(want)}")
    note(f"bfs from {start}, depth 2: {len(got)} nodes")
    no_errors("bfs")
    shot("bfs")


def step_error():
    traverse_form("rpq")
    fill("rpq-expr", "1/(")
    fill("rpq-sources", "0")
    act(lambda: by("traverse-run").click(), "the malformed rpq")
    errs = banner()
    check(len(errs) == 1 and errs[0][0] == "INVALID_ARGUMENT" and "position" in errs[0][1],
          f"malformed rpq: banner {errs}")
    check(by("error-banner").is_displayed(), "the banner is not visible")
    note(f"banner: {errs}")
    shot("error-banner")
    by("error-close").click()
    check(not banner(), "the banner does not close")


def status_doc(url):
    with urllib.request.urlopen(url.rstrip("/") + "/v1/status", timeout=10) as r:
        return json.loads(r.read())


def cluster_rows():
    return {name: (role, state) for name, role, state in rows("members", "name", "role", "state")}


def step_cluster(url, procs):
    doc = status_doc(url)
    navigate("#cluster", lambda: by("view-cluster").is_displayed(), "the cluster view")
    names = {m["name"] for m in doc["servers"]}
    wait_for(lambda: names <= set(cluster_rows()), "every member listed")
    members = cluster_rows()
    for m in doc["servers"]:
        check(members[m["name"]][0] == m["role"], f"member {m['name']}: role {members[m['name']]}")
        check(members[m["name"]][1] == "serving", f"member {m['name']}: state {members[m['name']]}")
    shards = rows("shards", "shard", "serving", "replicas")
    want = []
    for shard in range(doc["num_shards"]):
        hosts = [m for m in doc["servers"] if m["role"] == "shard" and shard in m["shards"]]
        up = [m for m in hosts if "error" not in m and m.get("status", {}).get("serving", True)]
        want.append([str(shard), str(len(up)), str(len(hosts))])
    check(shards == want, f"shards (shard, serving, replicas): {shards}, status {want}")
    if procs is not None:
        check(all(r[1] == r[2] == "2" for r in shards), f"not 2 serving replicas: {shards}")
    check(by("unserved").text == "none", f"unserved: {by('unserved').text!r}")
    check(by("logstore-leader").text == doc["logstore"], f"leader {by('logstore-leader').text!r}")
    standby = [m["name"] for m in doc["servers"] if m["role"] == "logstore" and not m.get("leader")]
    check(standby and by("logstore-standby").text == standby[0],
          f"standby {by('logstore-standby').text!r}, status {standby}")
    # calls/s: a number once two polls have answered, a line once three have.
    wait_for(lambda: js("""return [...document.querySelectorAll('[data-testid=members] .rate-value')]
                           .some(e => /^[0-9.]+$/.test(e.textContent))"""), "calls/s", timeout=8)
    wait_for(lambda: js("return !!document.querySelector('[data-testid=members] svg.spark polyline')"),
             "the calls/s line", timeout=8)
    note(f"{len(members)} members, {len(shards)} shards, LogStore lag "
         f"{by('logstore-lag').text!r}")
    no_errors("cluster")
    shot("cluster")

    if procs is None:
        print("SKIPPED: kill -9 of a replica and the cluster page after it "
              "(--url mode: no cluster of this test's own)", flush=True)
        return
    victim = sorted((m for m in doc["servers"] if m["role"] == "shard"),
                    key=lambda m: m["name"])[-1]
    pid = victim["pid"]
    if not check(pid in procs.known_pids, f"pid {pid} of {victim['name']} is not this test's"):
        return
    os.kill(pid, signal.SIGKILL)
    note(f"kill -9 {pid} ({victim['name']}, shards {victim['shards']})")

    def shows_down():
        state = cluster_rows().get(victim["name"], (None, None))[1]
        served = rows("shards", "shard", "serving")
        return state == "down" and served and all(int(s) >= 1 for _, s in served)
    wait_for(shows_down, f"{victim['name']} down and every shard served", timeout=KILL_WAIT)
    served = rows("shards", "shard", "serving")
    check(all(s == "1" for _, s in served), f"after the kill: shards (shard, serving) {served}")
    check(by("unserved").text == "none", f"after the kill: unserved {by('unserved').text!r}")
    others = {n: s for n, (_r, s) in cluster_rows().items() if n != victim["name"]}
    check(all(s == "serving" for s in others.values()), f"after the kill: others {others}")
    note(f"{victim['name']} shown down; shards served: {served}")
    shot("cluster-replica-killed")


def step_read_after_kill(ref, i):
    open_node_by_form(i)
    check(node_props() == ref.nodes[i], f"node {i} after the kill: properties")
    no_errors("read after the kill")
    shot("node-after-kill")


def browser_errors():
    """Uncaught script errors in the browser's console (failed requests the page reported
    itself, like the 400 of the malformed rpq, are not counted)."""
    out = []
    for e in driver.get_log("browser"):
        if e.get("level") == "SEVERE" and "Failed to load resource" not in e.get("message", ""):
            out.append(e["message"])
    return out


# ------------------------------------------------------------------------------------------------
def start_cluster():
    """Generates, compresses and starts the cluster; returns (url, data dir, procs)."""
    tmp, zipg = cluster_procs.private_binary(ARGS.zipg, "zipg-explorer-test-")
    store = os.path.join(tmp, "store")
    procs = cluster_procs.Procs("explorer_test", tmp, zipg, store)
    data = os.path.join(tmp, "data")
    for argv in (["gen", "graph", "--nodes", "400", "--properties", "6", "--degree", "8",
                  "--hot-edges", "120", "--out", data],
                 ["compress", "--nodes", os.path.join(data, "nodes.csv"), "--edges",
                  os.path.join(data, "edges.csv"), "--out", store]):
        r = subprocess.run([zipg, *argv], capture_output=True, timeout=60)
        if r.returncode != 0:
            raise StepFailed(f"zipg {argv[0]}: {r.stderr.decode(errors='replace')[-500:]}")
    r, state = procs.local_start(check, "--replicas", "2", "--logstores", "2", "--http")
    if state is None:
        raise StepFailed("the cluster did not start: " + r.stderr.decode(errors="replace")[:300])
    urls = [line.split()[1] for line in r.stdout.decode().splitlines() if line.startswith("http ")]
    if not urls:
        raise StepFailed(f"local start --http printed no 'http URL' line: {r.stdout.decode()!r}")
    note(f"cluster up: {len(urls)} aggregator(s) with HTTP; the page at {urls[0]}")
    return urls[0], data, procs


def on_alarm(_signum, _frame):
    raise TimeoutError(f"the test took more than {DEADLINE} s")


def main():
    global driver
    signal.signal(signal.SIGALRM, on_alarm)
    signal.alarm(DEADLINE)
    procs = None
    try:
        section("setup")
        if ARGS.url:
            url, data = ARGS.url, ARGS.data
            note(f"--url mode: {url}, reference {data}")
        else:
            url, data, procs = start_cluster()
        ref = Reference(data)
        busiest = ref.busiest_node()
        driver = start_browser()
        steps = [("load", lambda: step_load(url)),
                 ("search", lambda: step_search(ref)),
                 ("node", lambda: step_node(ref, busiest)),
                 ("paging", lambda: step_paging(ref, busiest)),
                 ("neighbourhood", lambda: step_neighbourhood(ref, ref.neighbourhood_node())),
                 ("traverse", lambda: step_traverse(ref, busiest)),
                 ("error", step_error),
                 ("cluster", lambda: step_cluster(url, procs))]
        if procs is not None:
            steps.append(("read after the kill", lambda: step_read_after_kill(ref, busiest)))
        for name, fn in steps:
            section(name)
            failures = report.failures
            try:
                fn()
            except (StepFailed, WebDriverException, AssertionError) as e:
                check(False, f"{name}: {e}")
            print(f"   {name}: {'passed' if report.failures == failures else 'FAILED'}", flush=True)
        errs = browser_errors()
        check(not errs, f"browser console errors: {errs[:5]}")
    except Exception as e:  # noqa: BLE001
        import traceback
        traceback.print_exc()
        check(False, f"test aborted: {e!r}")
    finally:
        signal.alarm(0)
        if driver is not None:
            try:
                driver.quit()
            except Exception:  # noqa: BLE001
                pass
        if procs is not None:
            section("stopping the cluster")
            procs.cleanup()
            left = [p for p in procs.known_pids if procs.alive(p)]
            check(not left, f"processes left: {left}")
    print(f"screenshots: {OUT}")
    sys.exit(report.finish("explorer_test"))


if __name__ == "__main__":
    main()

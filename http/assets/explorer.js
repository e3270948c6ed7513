// The zipg web explorer (docs/operations.md, "Web explorer"): plain JavaScript, no build step.
// Views by URL hash: #search, #node/ID, #traverse, #cluster. All data comes from the HTTP API:
// POST /v1/query (JSON lines, the `zipg query --batch` shapes) and GET /v1/status.
'use strict';
(function () {
  const PAGE = 50;            // edges per page of an edge record
  const PROBE_TYPES = 16;     // edge types probed on a node: 0..15
  const MAX_DRAWN = 200;      // nodes drawn at most in a graph
  const MAX_ROWS = 2000;      // rows shown at most in a traversal's table
  const PREVIEW = 50;         // search results shown with a value
  const POLL_MS = 2000;       // cluster page: /v1/status every 2 s
  const HISTORY = 30;         // calls/s samples kept per member
  const TIMEOUT_MS = 30000;   // a request that takes longer fails (the server's own limit is 10 s)

  const $ = (id) => document.getElementById(id);
  const explorer = (window.explorer = { cy: null, traverseCy: null, errors: [] });

  // ---------------------------------------------------------------------------------------------
  // DOM helper: el('td', {class: 'x', 'data-id': 7, onclick: f}, child, 'text', ...)
  function el(tag, attrs, ...children) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === null || v === undefined || v === false) continue;
      if (k === 'class') e.className = v;
      else if (k.startsWith('on')) e.addEventListener(k.slice(2), v);
      else e.setAttribute(k, v === true ? '' : String(v));
    }
    for (const c of children.flat()) {
      if (c !== null && c !== undefined) e.append(c instanceof Node ? c : String(c));
    }
    return e;
  }
  const nodeLink = (id) => el('a', { href: '#node/' + id, class: 'node-link', 'data-id': String(id) },
    String(id));

  // ---------------------------------------------------------------------------------------------
  // JSON with int64: ids and timestamps beyond 2^53 are kept exact as BigInt.
  function parseJson(text) {
    return JSON.parse(text, (key, value, context) => {
      if (typeof value === 'number' && !Number.isSafeInteger(value) && context &&
          /^-?\d+$/.test(context.source)) {
        return BigInt(context.source);
      }
      return value;
    });
  }
  function toJson(value) {
    if (JSON.rawJSON) {
      return JSON.stringify(value, (k, v) => (typeof v === 'bigint' ? JSON.rawJSON(v.toString()) : v));
    }
    // A browser without JSON.rawJSON (before 2023) sends ids past 2^53 rounded.
    return JSON.stringify(value, (k, v) => (typeof v === 'bigint' ? Number(v) : v));
  }
  // An integer typed by the user (an id or a type): a Number, or a BigInt past 2^53; null if
  // the text is not an integer.
  function parseInt64(text) {
    const t = String(text).trim();
    if (!/^-?\d+$/.test(t)) return null;
    const b = BigInt(t);
    return b >= BigInt(Number.MIN_SAFE_INTEGER) && b <= BigInt(Number.MAX_SAFE_INTEGER) ? Number(t) : b;
  }
  function parseIntList(text, what) {
    const t = text.trim();
    if (t === '') return null;
    return t.split(/[\s,]+/).filter((s) => s !== '').map((s) => {
      const v = parseInt64(s);
      if (v === null) throw new ApiError('INVALID_ARGUMENT', `${what}: '${s}' is not an integer`);
      return v;
    });
  }
  function requireInt(text, what) {
    const v = parseInt64(text);
    if (v === null) throw new ApiError('INVALID_ARGUMENT', `${what}: '${text}' is not an integer`);
    return v;
  }

  // ---------------------------------------------------------------------------------------------
  // The API
  class ApiError extends Error {
    constructor(code, message) {
      super(message);
      this.code = code;
    }
  }
  let pending = 0;
  function setPending(delta) {
    pending += delta;
    document.body.dataset.pending = String(pending);
    $('busy').hidden = pending === 0;
  }
  // fetch with a timeout; network failures become ApiError('NETWORK').
  async function httpText(url, options) {
    const controller = new AbortController();
    const timer = setTimeout(() => controller.abort(), TIMEOUT_MS);
    const what = `${(options && options.method) || 'GET'} ${url}`;
    setPending(1);
    try {
      const response = await fetch(url, { ...options, signal: controller.signal, cache: 'no-store' });
      return { status: response.status, statusText: response.statusText, text: await response.text() };
    } catch (e) {
      throw new ApiError('NETWORK', `${what} failed: ` +
        (e.name === 'AbortError' ? `no answer in ${TIMEOUT_MS / 1000} s` : e.message));
    } finally {
      clearTimeout(timer);
      setPending(-1);
    }
  }
  // Sends requests (objects {op, ...args}) as JSON lines in one POST; returns one answer per
  // request, each {ok: result} or {error: {code, message}}. Throws ApiError if the body as a
  // whole failed (network, 413, 408, ...).
  async function query(requests) {
    if (requests.length === 0) return [];
    const body = requests.map(toJson).join('\n') + '\n';
    const r = await httpText('/v1/query', {
      method: 'POST', headers: { 'Content-Type': 'application/x-ndjson' }, body,
    });
    let answers = null;
    try {
      answers = r.text.split('\n').filter((l) => l.trim() !== '').map(parseJson);
    } catch (e) { /* not JSON lines: reported below */ }
    const shaped = (a) => a && typeof a === 'object' && ('ok' in a || 'error' in a);
    if (answers && answers.length === requests.length && answers.every(shaped)) return answers;
    if (answers && answers.length === 1 && answers[0] && answers[0].error) {
      throw new ApiError(answers[0].error.code || 'HTTP ' + r.status, answers[0].error.message || '');
    }
    throw new ApiError(r.status >= 400 ? `HTTP ${r.status}` : 'BAD_RESPONSE',
      `POST /v1/query (${requests.length} request${requests.length > 1 ? 's' : ''}): ` +
      (r.status >= 400 ? `${r.statusText} ` : 'unexpected answer ') + r.text.slice(0, 300));
  }
  function okOf(answer) {
    if (answer.error) throw new ApiError(answer.error.code, answer.error.message);
    return answer.ok;
  }
  async function call(request) {
    return okOf((await query([request]))[0]);
  }
  async function getStatus() {
    const r = await httpText('/v1/status');
    let doc = null;
    try { doc = parseJson(r.text); } catch (e) { /* reported below */ }
    // The aggregator's own status failing: {"error": "CODE: message"} (or {code, message}).
    if (doc && doc.error) {
      if (typeof doc.error === 'object') {
        throw new ApiError(doc.error.code || `HTTP ${r.status}`, doc.error.message || '');
      }
      const m = /^([A-Z_]+): ([\s\S]*)$/.exec(String(doc.error));
      throw new ApiError(m ? m[1] : `HTTP ${r.status}`, `GET /v1/status: ${m ? m[2] : doc.error}`);
    }
    if (r.status === 200 && doc && typeof doc === 'object') return doc;
    throw new ApiError(`HTTP ${r.status}`, `GET /v1/status: ${r.statusText} ${r.text.slice(0, 300)}`);
  }

  // ---------------------------------------------------------------------------------------------
  // The error banner: every error with its code and message. Errors of a user action are cleared
  // when the next action starts; the cluster poll's error ('status') when a poll succeeds.
  const errors = new Map();
  let errorSeq = 0;
  function showError(err, key) {
    const code = err instanceof ApiError ? err.code : 'CLIENT';
    const message = err instanceof ApiError ? err.message : String((err && err.message) || err);
    errors.set(key || 'e' + ++errorSeq, { code, message });
    explorer.errors.push({ code, message });  // for tests and the console: the last 100
    if (explorer.errors.length > 100) explorer.errors.shift();
    if (!(err instanceof ApiError)) console.error(err);
    renderBanner();
  }
  function clearError(key) {
    if (errors.delete(key)) renderBanner();
  }
  function clearActionErrors() {
    for (const k of [...errors.keys()]) if (k !== 'status') errors.delete(k);
    renderBanner();
  }
  function renderBanner() {
    $('banner-list').replaceChildren(...[...errors.values()].map((e) => el('li', { 'data-testid': 'error' },
      el('code', { class: 'error-code', 'data-testid': 'error-code' }, e.code), ' ',
      el('span', { class: 'error-message', 'data-testid': 'error-message' }, e.message))));
    $('banner').hidden = errors.size === 0;
  }
  // Wraps an event handler: clears the previous action's errors, reports this one's. The body's
  // data-busy (actions running) and data-done (actions finished) let a test wait for an action.
  let busy = 0, done = 0;
  function action(fn) {
    return async (event) => {
      if (event && event.preventDefault) event.preventDefault();
      document.body.dataset.busy = String(++busy);
      clearActionErrors();
      try {
        await fn(event);
      } catch (e) {
        showError(e);
      } finally {
        document.body.dataset.busy = String(--busy);
        document.body.dataset.done = String(++done);
      }
    };
  }
  window.addEventListener('error', (e) => showError(new ApiError('SCRIPT', e.message)));
  window.addEventListener('unhandledrejection', (e) => showError(e.reason));
  $('banner-close').addEventListener('click', () => { errors.clear(); renderBanner(); });

  // ---------------------------------------------------------------------------------------------
  // Formatting
  // A timestamp as its integer, with a UTC date when it reads as Unix seconds of 1970..2100.
  function tsCell(ts) {
    const cell = el('td', { class: 'ts', 'data-ts': String(ts) }, String(ts));
    if (typeof ts === 'number' && ts >= 0 && ts < 4102444800) {
      cell.append(el('small', {}, ' ' + new Date(ts * 1000).toISOString().replace('T', ' ').slice(0, 19)));
    }
    return cell;
  }
  function propsText(props) {
    return Object.entries(props || {}).map(([k, v]) => `${k}=${v}`).join('  ');
  }
  function bytes(n) {
    if (typeof n !== 'number') return '';
    const units = ['B', 'KiB', 'MiB', 'GiB'];
    let i = 0;
    while (n >= 1024 && i < units.length - 1) { n /= 1024; i++; }
    return `${n.toFixed(i ? 1 : 0)} ${units[i]}`;
  }

  // ---------------------------------------------------------------------------------------------
  // Graph drawings (cytoscape)
  function newCy(container) {
    if (typeof window.cytoscape !== 'function') {
      throw new ApiError('CLIENT', 'cytoscape did not load (/static/vendor/cytoscape.min.js): no drawing');
    }
    return window.cytoscape({
      container,
      minZoom: 0.2,
      maxZoom: 1.5,
      wheelSensitivity: 0.3,
      style: [
        { selector: 'node', style: {
          label: 'data(id)', 'font-size': 10, 'text-valign': 'center', 'text-halign': 'center',
          width: 26, height: 26, 'background-color': '#9ecae1', 'border-width': 1, 'border-color': '#4682b4',
        } },
        { selector: 'node.expanded', style: { 'background-color': '#4292c6', color: '#fff' } },
        { selector: 'node.root', style: { 'background-color': '#e6550d', color: '#fff', width: 34, height: 34 } },
        { selector: 'node:selected', style: { 'border-width': 3, 'border-color': '#222' } },
        { selector: 'edge', style: {
          width: 1, 'line-color': '#bbb', 'target-arrow-color': '#bbb', 'target-arrow-shape': 'triangle',
          'curve-style': 'bezier', 'arrow-scale': 0.7,
        } },
        { selector: 'edge.pair', style: { 'line-style': 'dashed', 'line-color': '#8c6bb1', 'target-arrow-color': '#8c6bb1' } },
      ],
    });
  }
  // Rings around the root, filled depth by depth in the order the nodes were added (so the
  // neighbours of one node sit together); a ring holds a few more nodes than the one inside it,
  // so a crowded depth takes several rings rather than one ring of tiny nodes.
  function concentricLayout(cy) {
    const nodes = cy.nodes().toArray();
    const order = new Map(nodes.map((n, i) => [n.id(), i]));
    nodes.sort((a, b) => (a.data('depth') || 0) - (b.data('depth') || 0) || order.get(a.id()) - order.get(b.id()));
    let ring = -1, used = 0, capacity = 0, depth = -1;
    for (const n of nodes) {
      const d = n.data('depth') || 0;
      if (d !== depth || used >= capacity) {
        ring++;
        used = 0;
        capacity = ring === 0 ? 1 : 8 * ring + 4;
        depth = d;
      }
      n.data('ring', ring);
      used++;
    }
    cy.layout({
      name: 'concentric', animate: false, minNodeSpacing: 8, avoidOverlap: true,
      concentric: (n) => 1000 - n.data('ring'), levelWidth: () => 1,
    }).run();
  }

  // ---------------------------------------------------------------------------------------------
  // Router
  const VIEWS = ['search', 'node', 'traverse', 'cluster'];
  function route() {
    const hash = decodeURIComponent(location.hash.replace(/^#/, '')) || 'search';
    const slash = hash.indexOf('/');
    let view = slash < 0 ? hash : hash.slice(0, slash);
    const arg = slash < 0 ? '' : hash.slice(slash + 1);
    if (!VIEWS.includes(view)) {
      clearActionErrors();
      showError(new ApiError('NOT_FOUND', `no view '${hash}': the views are #search, #node/ID, ` +
        '#traverse and #cluster'));
      view = 'search';
    }
    for (const v of VIEWS) $('view-' + v).hidden = v !== view;
    for (const v of ['search', 'traverse', 'cluster']) {
      $('nav-' + v).classList.toggle('active', v === view);
    }
    document.body.dataset.view = view;
    if (view === 'cluster') startPolling(); else stopPolling();
    if (view === 'node') action(() => openNode(arg))();
    if (view === 'search') loadPropertyNames();
    if (view === 'traverse' && explorer.traverseCy) explorer.traverseCy.resize();
  }
  window.addEventListener('hashchange', route);
  $('goto-form').addEventListener('submit', action(() => {
    const id = requireInt($('goto-id').value, 'node id');
    location.hash = '#node/' + id;
  }));

  // ---------------------------------------------------------------------------------------------
  // Search
  function addExactRow(name, value) {
    const row = el('div', { class: 'prop-row', 'data-testid': 'exact-row' },
      el('input', { class: 'prop-name', 'data-testid': 'exact-name', placeholder: 'property', list: 'property-names', value: name || '' }),
      ' = ',
      el('input', { class: 'prop-value', 'data-testid': 'exact-value', placeholder: 'value', value: value || '' }),
      el('button', { type: 'button', class: 'remove', title: 'remove', onclick: () => row.remove() }, '×'));
    $('exact-rows').append(row);
  }
  addExactRow();
  $('exact-add').addEventListener('click', () => addExactRow());

  let propertyNamesLoaded = false;
  async function loadPropertyNames() {
    if (propertyNamesLoaded) return;
    propertyNamesLoaded = true;
    try {
      const doc = await getStatus();
      const store = doc.store || {};
      const names = store.node_properties || [];
      $('property-names').replaceChildren(...names.map((n) => el('option', { value: n })));
      if (typeof store.nodes === 'number') {
        $('store-info').textContent = `The store: ${store.nodes} nodes and ${store.edges} edges ` +
          `when compressed; node properties: ${names.join(', ') || 'none'}.`;
      }
    } catch (e) {
      propertyNamesLoaded = false;
      showError(e, 'status');
    }
  }

  $('exact-form').addEventListener('submit', action(async () => {
    const properties = {};
    for (const row of $('exact-rows').querySelectorAll('.prop-row')) {
      const name = row.querySelector('.prop-name').value;
      if (name === '') continue;
      properties[name] = row.querySelector('.prop-value').value;
    }
    const ids = await call({ op: 'get_node_ids', properties });
    const what = Object.entries(properties).map(([k, v]) => `${k} = "${v}"`).join(' and ');
    await showSearchResults(ids, false, `exact: ${what || '(no property)'}`, (v, k) => k in properties);
  }));

  $('value-form').addEventListener('submit', action(async () => {
    const request = { op: 'search_node_ids', pattern: $('value-pattern').value, match: $('value-match').value };
    const property = $('value-property').value;
    if (property !== '') request.property = property;
    const limit = $('value-limit').value.trim();
    if (limit !== '') request.limit = requireInt(limit, 'limit');
    const result = await call(request);
    const p = request.pattern;
    const test = { contains: (v) => v.includes(p), prefix: (v) => v.startsWith(p),
      suffix: (v) => v.endsWith(p), exact: (v) => v === p }[request.match];
    await showSearchResults(result.ids, result.truncated,
      `${request.match} "${p}" in ${property === '' ? 'any property' : property}`,
      (v, k) => (property === '' || k === property) && test(v));
  }));

  // Lists the ids; the first PREVIEW with the value that matched (`matches(value, name)`).
  async function showSearchResults(ids, truncated, what, matches) {
    $('search-summary').textContent = `${ids.length}${truncated ? '+ (truncated: more exist)' : ''} ` +
      `node${ids.length === 1 ? '' : 's'} — ${what}`;
    const tbody = $('search-results').querySelector('tbody');
    const rows = ids.map((id) => el('tr', { 'data-id': String(id) }, el('td', {}, nodeLink(id)),
      el('td', { class: 'value' })));
    tbody.replaceChildren(...rows);
    $('search-results').hidden = ids.length === 0;
    const first = ids.slice(0, PREVIEW);
    const answers = await query(first.map((id) => ({ op: 'get_node_property', id })));
    answers.forEach((a, i) => {
      if (a.error) { showError(new ApiError(a.error.code, `node ${first[i]}: ${a.error.message}`)); return; }
      const hit = Object.entries(a.ok || {}).filter(([k, v]) => matches(v, k));
      rows[i].lastChild.textContent = hit.map(([k, v]) => `${k}: ${v}`).join('  ·  ');
    });
  }

  // ---------------------------------------------------------------------------------------------
  // Node
  const node = { id: null, seq: 0, records: new Map(), pageType: null, page: 0 };

  async function openNode(arg) {
    const id = requireInt(arg, 'node id');
    const seq = ++node.seq;
    Object.assign(node, { id, records: new Map(), pageType: null, page: 0 });
    $('node-id').textContent = String(id);
    $('node-traverse').href = '#traverse';
    $('node-props').querySelector('tbody').replaceChildren();
    $('edge-records').querySelector('tbody').replaceChildren();
    $('node-missing').hidden = true;
    $('edge-page').hidden = true;
    const drawing = drawNeighbourhood(id, Number($('hops').value), seq).catch(showError);

    const probes = [];
    for (let t = 0; t < PROBE_TYPES; t++) probes.push({ op: 'get_edge_record', id, type: t });
    const [obj, ...records] = await query([{ op: 'obj_get', id }, ...probes]);
    if (seq !== node.seq) return;
    if (obj.error) {
      showError(new ApiError(obj.error.code, `obj_get ${id}: ${obj.error.message}`));
    } else if (obj.ok === null) {
      $('node-missing').hidden = false;
    } else {
      $('node-props').querySelector('tbody').replaceChildren(...Object.entries(obj.ok.properties).map(
        ([k, v]) => el('tr', { 'data-prop': k }, el('th', {}, k), el('td', { class: 'value' }, v))));
    }
    const found = [];
    records.forEach((r, t) => {
      if (r.error) showError(new ApiError(r.error.code, `get_edge_record type ${t}: ${r.error.message}`));
      else if (r.ok.count > 0) found.push({ type: t, count: r.ok.count });
    });
    await addRecords(found, seq);
    if (found.length === 0 && !records.some((r) => r.error)) {
      $('edge-records').querySelector('tbody').append(
        el('tr', { class: 'empty' }, el('td', { colspan: 5 }, `no edges of types 0–${PROBE_TYPES - 1}`)));
    }
    await drawing;
  }

  // Adds rows for records {type, count}: newest and oldest timestamps from assoc_range at
  // pos 0 and count-1, all in one request.
  async function addRecords(found, seq) {
    const ranges = [];
    for (const r of found) {
      if (r.count > 0) {
        ranges.push({ op: 'assoc_range', id: node.id, type: r.type, pos: 0, limit: 1 });
        ranges.push({ op: 'assoc_range', id: node.id, type: r.type, pos: r.count - 1, limit: 1 });
      }
    }
    const answers = await query(ranges);
    if (seq !== node.seq) return;
    const tbody = $('edge-records').querySelector('tbody');
    tbody.querySelector('tr.empty')?.remove();
    let k = 0;
    for (const r of found) {
      let newest = null, oldest = null;
      if (r.count > 0) {
        const [a, b] = [answers[k++], answers[k++]];
        for (const x of [a, b]) {
          if (x.error) showError(new ApiError(x.error.code, `assoc_range type ${r.type}: ${x.error.message}`));
        }
        newest = a.ok && a.ok[0] ? a.ok[0].timestamp : null;
        oldest = b.ok && b.ok[0] ? b.ok[0].timestamp : null;
      }
      node.records.set(String(r.type), r);
      const row = el('tr', { 'data-type': String(r.type), 'data-count': String(r.count) },
        el('td', { class: 'type' }, String(r.type)),
        el('td', { class: 'count' }, String(r.count)),
        newest === null ? el('td', { class: 'ts' }, '—') : tsCell(newest),
        oldest === null ? el('td', { class: 'ts' }, '—') : tsCell(oldest),
        el('td', {}, r.count > 0
          ? el('button', { type: 'button', class: 'open-edges', 'data-testid': 'open-edges',
            onclick: action(() => showEdgePage(r.type, 0)) }, 'edges')
          : ''));
      row.cells[2].classList.add('newest');
      row.cells[3].classList.add('oldest');
      tbody.append(row);
    }
  }

  $('add-type-form').addEventListener('submit', action(async () => {
    const type = requireInt($('add-type').value, 'type');
    const existing = $('edge-records').querySelector(`tr[data-type="${type}"]`);
    if (existing) {
      existing.classList.add('flash');
      setTimeout(() => existing.classList.remove('flash'), 1500);
      return;
    }
    const seq = node.seq;
    const rec = await call({ op: 'get_edge_record', id: node.id, type });
    if (seq === node.seq) await addRecords([{ type, count: rec.count }], seq);
  }));

  async function showEdgePage(type, page) {
    const rec = node.records.get(String(type));
    const count = rec ? rec.count : 0;
    const pages = Math.max(1, Math.ceil(count / PAGE));
    page = Math.min(Math.max(0, page), pages - 1);
    const seq = node.seq;
    const edges = await call({ op: 'assoc_range', id: node.id, type, pos: page * PAGE, limit: PAGE });
    if (seq !== node.seq) return;
    node.pageType = type;
    node.page = page;
    $('edge-page').hidden = false;
    $('edge-page').dataset.type = String(type);
    $('edge-page').dataset.page = String(page);
    $('edge-page-title').textContent = `Edges of type ${type} from node ${node.id}`;
    $('edge-page-info').textContent = count === 0 ? 'no edges'
      : `edges ${page * PAGE + 1}–${page * PAGE + edges.length} of ${count} (page ${page + 1} of ${pages})`;
    $('edge-prev').disabled = page === 0;
    $('edge-next').disabled = page >= pages - 1;
    $('edge-list').querySelector('tbody').replaceChildren(...edges.map((e, i) =>
      el('tr', { 'data-dst': String(e.dst), 'data-ts': String(e.timestamp) },
        el('td', { class: 'pos' }, String(page * PAGE + i)),
        el('td', { class: 'dst' }, nodeLink(e.dst)),
        tsCell(e.timestamp),
        el('td', { class: 'value' }, propsText(e.properties)))));
    $('edge-page').scrollIntoView({ block: 'nearest' });
  }
  $('edge-prev').addEventListener('click', action(() => showEdgePage(node.pageType, node.page - 1)));
  $('edge-next').addEventListener('click', action(() => showEdgePage(node.pageType, node.page + 1)));

  // The neighbourhood: the node, its out-neighbours (1 or 2 hops); a click expands a node.
  let skipped = 0;
  async function drawNeighbourhood(id, hops, seq) {
    if (!explorer.cy) {
      explorer.cy = newCy($('cy'));
      explorer.cy.on('tap', 'node', (e) => action(() => expand(e.target.id()))());
      explorer.cy.on('dbltap', 'node', (e) => { location.hash = '#node/' + e.target.id(); });
    }
    const cy = explorer.cy;
    cy.elements().remove();
    skipped = 0;
    cy.add({ group: 'nodes', data: { id: String(id), depth: 0 }, classes: 'root' });
    let frontier = [String(id)];
    for (let h = 1; h <= hops && frontier.length > 0; h++) {
      frontier = await expandAll(frontier, seq);
      if (seq !== node.seq) return;
    }
    concentricLayout(cy);
    cyInfo();
  }
  // Fetches the out-neighbours of `ids` in one request and draws them; returns the new ids.
  async function expandAll(ids, seq) {
    const cy = explorer.cy;
    const answers = await query(ids.map((i) => ({ op: 'get_neighbor_ids', id: parseInt64(i) })));
    if (seq !== node.seq) return [];
    const added = [];
    answers.forEach((a, k) => {
      const src = ids[k];
      if (a.error) { showError(new ApiError(a.error.code, `get_neighbor_ids ${src}: ${a.error.message}`)); return; }
      const from = cy.getElementById(src);
      from.addClass('expanded');
      const depth = (from.data('depth') || 0) + 1;
      for (const d of a.ok) {
        const dst = String(d);
        if (cy.getElementById(dst).empty()) {
          if (cy.nodes().length >= MAX_DRAWN) { skipped++; continue; }
          cy.add({ group: 'nodes', data: { id: dst, depth } });
          added.push(dst);
        }
        const eid = src + '>' + dst;
        if (cy.getElementById(eid).empty()) cy.add({ group: 'edges', data: { id: eid, source: src, target: dst } });
      }
    });
    return added;
  }
  async function expand(id) {
    const cy = explorer.cy;
    if (cy.getElementById(id).hasClass('expanded')) { cyInfo(id); return; }
    await expandAll([id], node.seq);
    concentricLayout(cy);
    cyInfo(id);
  }
  function cyInfo(selected) {
    const cy = explorer.cy;
    const info = $('cy-info');
    info.replaceChildren(`${cy.nodes().length} nodes drawn` +
      (skipped ? ` (at most ${MAX_DRAWN}: ${skipped} not drawn)` : '') +
      '. Click a node to expand it, double-click to open it.');
    if (selected) info.append(' Selected: ', nodeLink(selected));
    $('cy').dataset.nodes = String(cy.nodes().length);
  }
  $('redraw').addEventListener('click', action(() => {
    if (node.id !== null) return drawNeighbourhood(node.id, Number($('hops').value), node.seq);
  }));
  $('hops').addEventListener('change', () => $('redraw').click());
  $('node-traverse').addEventListener('click', () => {
    $('bfs-id').value = String(node.id);
    $('rpq-sources').value = String(node.id);
  });

  // ---------------------------------------------------------------------------------------------
  // Traverse
  function kind() {
    return document.querySelector('input[name="trav-kind"]:checked').value;
  }
  for (const r of document.querySelectorAll('input[name="trav-kind"]')) {
    r.addEventListener('change', () => {
      $('bfs-fields').hidden = kind() !== 'bfs';
      $('rpq-fields').hidden = kind() !== 'rpq';
    });
  }
  $('traverse-form').addEventListener('submit', action(async () => {
    let request;
    if (kind() === 'bfs') {
      request = { op: 'bfs', id: requireInt($('bfs-id').value, 'start'),
        max_depth: requireInt($('bfs-depth').value, 'max depth') };
      const types = parseIntList($('bfs-types').value, 'types');
      if (types) request.types = types;
      if ($('bfs-limit').value.trim() !== '') request.limit = requireInt($('bfs-limit').value, 'limit');
    } else {
      request = { op: 'rpq', expr: $('rpq-expr').value };
      const sources = parseIntList($('rpq-sources').value, 'sources');
      if (sources) request.sources = sources;
      if ($('rpq-limit').value.trim() !== '') request.limit = requireInt($('rpq-limit').value, 'limit');
    }
    $('traverse-summary').textContent = 'running…';
    $('traverse-table').hidden = true;
    $('traverse-cy').hidden = true;
    $('traverse-cy-info').textContent = '';
    let result;
    try {
      result = await call(request);
    } catch (e) {
      $('traverse-summary').textContent = `${request.op} failed`;
      throw e;
    }
    if (request.op === 'bfs') await showBfs(request, result); else showRpq(request, result);
  }));

  function traverseTable(head, rows, total) {
    const table = $('traverse-table');
    table.querySelector('thead').replaceChildren(el('tr', {}, head.map((h) => el('th', {}, h))));
    table.querySelector('tbody').replaceChildren(...rows.slice(0, MAX_ROWS));
    table.dataset.rows = String(total);
    table.hidden = false;
  }
  function traverseDrawing() {
    $('traverse-cy').hidden = false;
    if (!explorer.traverseCy) {
      explorer.traverseCy = newCy($('traverse-cy'));
      explorer.traverseCy.on('dbltap', 'node', (e) => { location.hash = '#node/' + e.target.id(); });
    }
    const cy = explorer.traverseCy;
    cy.resize();
    cy.elements().remove();
    return cy;
  }

  async function showBfs(request, entries) {
    $('traverse-summary').textContent = `bfs from ${request.id}, depth ≤ ${request.max_depth}` +
      (request.types ? `, types ${request.types.join(',')}` : '') + `: ${entries.length} nodes` +
      (entries.length > MAX_ROWS ? ` (first ${MAX_ROWS} listed)` : '');
    traverseTable(['id', 'depth'], entries.map((e) => el('tr', { 'data-id': String(e.id), 'data-depth': String(e.depth) },
      el('td', {}, nodeLink(e.id)), el('td', {}, String(e.depth)))), entries.length);
    // The drawing: the first MAX_DRAWN entries, and the edges from depth d to d+1 among them.
    const cy = traverseDrawing();
    const drawn = entries.slice(0, MAX_DRAWN);
    const depth = new Map(drawn.map((e) => [String(e.id), e.depth]));
    cy.add(drawn.map((e) => ({ group: 'nodes', data: { id: String(e.id), depth: e.depth },
      classes: e.depth === 0 ? 'root' : '' })));
    const inner = drawn.filter((e) => e.depth < request.max_depth);
    const types = request.types || [null];
    const asks = [];
    for (const e of inner) {
      for (const t of types) asks.push(t === null ? { op: 'get_neighbor_ids', id: e.id } : { op: 'get_neighbor_ids', id: e.id, type: t });
    }
    const answers = await query(asks.slice(0, 4000));
    answers.forEach((a, k) => {
      if (a.error) { showError(new ApiError(a.error.code, `get_neighbor_ids: ${a.error.message}`)); return; }
      const src = String(asks[k].id);
      for (const d of a.ok) {
        const dst = String(d);
        if (depth.get(dst) === depth.get(src) + 1 && cy.getElementById(src + '>' + dst).empty()) {
          cy.add({ group: 'edges', data: { id: src + '>' + dst, source: src, target: dst } });
        }
      }
    });
    concentricLayout(cy);
    $('traverse-cy-info').textContent = `${cy.nodes().length} nodes drawn` +
      (entries.length > MAX_DRAWN ? ` (the first ${MAX_DRAWN})` : '') + ', in rings by depth.';
  }

  function showRpq(request, result) {
    const pairs = result.pairs;
    $('traverse-summary').textContent = `rpq ${request.expr}` +
      (request.sources ? ` from ${request.sources.join(',')}` : '') + `: ${pairs.length} pairs` +
      (result.truncated ? ' (truncated: more exist)' : '') +
      (pairs.length > MAX_ROWS ? ` (first ${MAX_ROWS} listed)` : '');
    $('traverse-table').dataset.truncated = String(result.truncated);
    traverseTable(['src', 'dst'], pairs.map(([s, d]) => el('tr', { 'data-src': String(s), 'data-dst': String(d) },
      el('td', {}, nodeLink(s)), el('td', {}, nodeLink(d)))), pairs.length);
    // The drawing: one arrow per pair (a path that spells the expression), MAX_DRAWN nodes.
    const cy = traverseDrawing();
    let skippedPairs = 0;
    for (const [s, d] of pairs) {
      const ids = [String(s), String(d)];
      const missing = ids.filter((i, k) => cy.getElementById(i).empty() && (k === 0 || i !== ids[0]));
      if (cy.nodes().length + missing.length > MAX_DRAWN) { skippedPairs++; continue; }
      for (const i of missing) cy.add({ group: 'nodes', data: { id: i } });
      cy.add({ group: 'edges', data: { id: ids[0] + '>' + ids[1], source: ids[0], target: ids[1] }, classes: 'pair' });
    }
    cy.layout({ name: 'cose', animate: false, randomize: true, nodeDimensionsIncludeLabels: true }).run();
    $('traverse-cy-info').textContent = `${cy.nodes().length} nodes drawn; an arrow per pair` +
      (skippedPairs ? ` (${skippedPairs} pairs not drawn: at most ${MAX_DRAWN} nodes)` : '') + '.';
  }

  // ---------------------------------------------------------------------------------------------
  // Cluster
  let pollTimer = null, polling = false;
  const samples = new Map();   // member name -> {pid, calls, t, rates: [...]}
  const seen = new Map();      // member name -> last entry seen (members that vanish are shown down)

  function startPolling() {
    if (polling) return;
    polling = true;
    poll();
  }
  function stopPolling() {
    polling = false;
    clearTimeout(pollTimer);
  }
  async function poll() {
    if (!polling) return;
    try {
      const doc = await getStatus();
      clearError('status');
      renderCluster(doc);
    } catch (e) {
      showError(e, 'status');
      $('cluster-updated').textContent = `(not updated since ${$('cluster-updated').dataset.at || 'the start'})`;
    }
    if (polling) pollTimer = setTimeout(poll, POLL_MS);
  }

  function memberState(m) {
    if (m.gone) return 'down';
    if (m.error || (m.status && m.status.error)) return 'down';
    if (m.role === 'shard') {
      const serving = m.status && 'serving' in m.status ? m.status.serving : m.serving;
      if (serving === false) return 'catching up';
    }
    return 'serving';
  }
  function rate(m, now) {
    const calls = m.status && typeof m.status.calls === 'number' ? m.status.calls : null;
    let s = samples.get(m.name);
    if (calls === null) {  // no answer: no rate
      if (s) s.current = null;
      return s;
    }
    if (!s || s.pid !== m.pid || calls < s.calls) {
      s = { pid: m.pid, calls, t: now, rates: s ? s.rates : [], current: null };
      samples.set(m.name, s);
      return s;
    }
    const dt = (now - s.t) / 1000;
    if (dt > 0) {
      s.current = (calls - s.calls) / dt;
      s.rates.push(s.current);
      if (s.rates.length > HISTORY) s.rates.shift();
    }
    s.calls = calls;
    s.t = now;
    return s;
  }
  function sparkline(values) {
    const w = 90, h = 18, ns = 'http://www.w3.org/2000/svg';
    const svg = document.createElementNS(ns, 'svg');
    svg.setAttribute('width', w);
    svg.setAttribute('height', h);
    svg.setAttribute('class', 'spark');
    if (values.length > 1) {
      const max = Math.max(1, ...values);
      const pts = values.map((v, i) => `${(i * (w - 2)) / (HISTORY - 1) + 1},${h - 1 - (v / max) * (h - 2)}`);
      const line = document.createElementNS(ns, 'polyline');
      line.setAttribute('points', pts.join(' '));
      svg.append(line);
    }
    return svg;
  }

  function renderCluster(doc) {
    const now = Date.now();
    const at = new Date(now).toLocaleTimeString();
    $('cluster-updated').textContent = `(updated ${at}, every ${POLL_MS / 1000} s)`;
    $('cluster-updated').dataset.at = at;
    const servers = doc.servers || [];
    const present = new Set(servers.map((m) => m.name));
    for (const m of servers) seen.set(m.name, m);
    const members = [...servers];
    for (const [name, m] of seen) {
      if (!present.has(name)) members.push({ ...m, gone: true, status: undefined, error: 'no longer registered' });
    }
    const order = { aggregator: 0, logstore: 1, shard: 2 };
    members.sort((a, b) => (order[a.role] ?? 9) - (order[b.role] ?? 9) || a.name.localeCompare(b.name));

    const unserved = doc.unserved_shards || [];
    const summary = $('cluster-summary');
    summary.replaceChildren(
      el('span', { class: doc.healthy ? 'ok' : 'bad', 'data-testid': 'cluster-health' },
        doc.healthy ? 'healthy' : 'unhealthy'),
      ` · cluster ${doc.cluster} · ${doc.num_shards} shards · unserved: `,
      el('span', { 'data-testid': 'unserved', class: unserved.length ? 'bad' : '' },
        unserved.length ? unserved.join(', ') : 'none'),
      ` · answered by ${doc.aggregator || '?'}`,
      doc.problem ? el('span', { class: 'bad' }, ` · problem: ${doc.problem}`) : '');
    summary.dataset.healthy = String(!!doc.healthy);

    $('members').querySelector('tbody').replaceChildren(...members.map((m) => {
      const state = memberState(m);
      const s = m.gone ? null : rate(m, now);
      const role = m.role === 'logstore' ? (m.leader ? 'logstore (leader)' : 'logstore (standby)') : m.role;
      const why = m.error || (m.status && m.status.error) || '';
      return el('tr', { 'data-name': m.name, 'data-role': m.role, 'data-state': state, 'data-pid': m.pid },
        el('td', {}, role),
        el('td', { class: 'name' }, m.name),
        el('td', {}, m.endpoint || '',
          m.http ? [' ', el('a', { href: m.http, title: 'this aggregator\'s explorer' }, 'explorer')] : '',
          m.metrics ? [' ', el('a', { href: m.metrics }, 'metrics')] : ''),
        el('td', {}, m.pid ?? ''),
        el('td', { class: 'state ' + state.replace(' ', '-'), title: why },
          state, why ? el('small', {}, ' ' + why) : ''),
        el('td', {}, m.role === 'shard' ? (m.shards || []).join(', ') : ''),
        el('td', { class: 'rate' },
          el('span', { class: 'rate-value' }, s && s.current !== null ? s.current.toFixed(1) : '—'), ' ',
          sparkline(s ? s.rates : [])),
        el('td', {}, m.status && m.status.memory ? bytes(m.status.memory.rss_bytes) : ''));
    }));

    // Shards: which members host each one, and in what state.
    const rows = [];
    for (let shard = 0; shard < (doc.num_shards || 0); shard++) {
      const replicas = members.filter((m) => m.role === 'shard' && (m.shards || []).includes(shard));
      const serving = replicas.filter((m) => memberState(m) === 'serving').length;
      const down = unserved.includes(shard);
      rows.push(el('tr', { 'data-shard': shard, 'data-serving': serving, 'data-replicas': replicas.length },
        el('td', {}, String(shard)),
        el('td', {}, replicas.map((m) => el('span', { class: 'replica ' + memberState(m).replace(' ', '-') },
          `${m.name} (${memberState(m)})`))),
        el('td', { class: down || serving === 0 ? 'bad' : 'ok' },
          down ? 'unserved' : `${serving} of ${replicas.length}`)));
    }
    $('shards').querySelector('tbody').replaceChildren(...rows);

    renderLogStore(doc, members);
  }

  function renderLogStore(doc, members) {
    const stores = members.filter((m) => m.role === 'logstore');
    const leader = stores.find((m) => m.leader && !m.gone) ||
      stores.find((m) => m.name === doc.logstore && !m.gone);
    const standby = stores.find((m) => m !== leader && !m.gone);
    const dl = $('logstore');
    const item = (term, ...value) => [el('dt', {}, term), el('dd', {}, ...value)];
    const parts = [];
    if (!leader) {
      parts.push(...item('leader', el('span', { class: 'bad', 'data-testid': 'logstore-leader' }, 'none')));
    } else {
      const ls = (leader.status && leader.status.logstore) || {};
      parts.push(...item('leader', el('span', { 'data-testid': 'logstore-leader' }, leader.name),
        ` (${memberState(leader)}, epoch ${ls.epoch ?? leader.epoch ?? '?'}` +
        (typeof ls.writes === 'number' ? `, ${ls.writes} writes` : '') + ')'));
      if (ls.writes_stopped) parts.push(...item('writes', el('span', { class: 'bad' }, `stopped: ${ls.writes_stopped}`)));
    }
    if (standby) {
      const sent = leader && leader.status && leader.status.logstore && leader.status.logstore.standby;
      const got = standby.status && standby.status.logstore && standby.status.logstore.standby;
      const sync = (sent && sent.sync) || (leader && leader.sync) || '?';
      let lag = '?';
      if (sent && typeof sent.lag === 'number') lag = String(sent.lag);
      else if (sent && got && typeof sent.shipped_groups === 'number' && typeof got.applied_groups === 'number') {
        lag = `${Math.max(0, sent.shipped_groups - got.applied_groups)} commit groups ` +
          `(shipped ${sent.shipped_groups}, applied ${got.applied_groups})`;
      }
      parts.push(...item('standby', el('span', { 'data-testid': 'logstore-standby' }, standby.name),
        ` (${memberState(standby)})`));
      parts.push(...item('sync', el('span', { class: sync === 'in_sync' ? 'ok' : 'bad', 'data-testid': 'logstore-sync' }, sync),
        sent && sent.reason ? ` — ${sent.reason}` : ''));
      parts.push(...item('standby lag', el('span', { 'data-testid': 'logstore-lag' }, lag)));
    } else {
      parts.push(...item('standby', el('span', { 'data-testid': 'logstore-standby' }, 'none')));
    }
    dl.replaceChildren(...parts);
  }

  // ---------------------------------------------------------------------------------------------
  if (typeof window.cytoscape !== 'function') {
    showError(new ApiError('CLIENT', 'cytoscape did not load (/static/vendor/cytoscape.min.js): graphs are not drawn'), 'cytoscape');
  }
  explorer.query = query;
  explorer.ready = true;
  route();
})();

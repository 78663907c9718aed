// The live dashboard of the admin API. Plain browser JavaScript, no build step. The admin token is asked for
// once, kept in this tab's sessionStorage and sent in the Authorization header of every request, the event
// stream included (read with fetch(), since EventSource cannot send headers); it never goes into a URL.

const TOKEN_KEY = 'mcp-task-gateway.admin-token'
/** Tasks shown (and read at connect): the newest ones. */
const TASK_ROWS = 200
const TERMINAL = new Set(['completed', 'failed', 'cancelled'])

const $ = (id) => document.getElementById(id)

const state = {
  token: sessionStorage.getItem(TOKEN_KEY),
  processId: '',
  /** id → task summary, as GET /admin/tasks lists them. */
  tasks: new Map(),
  openTask: null,
  stream: null,
  retryMs: 1000,
  detailTimer: undefined,
}

class AuthError extends Error {}

async function api (path, options = {}) {
  const response = await fetch(path, { ...options, headers: { authorization: `Bearer ${state.token}`, accept: 'application/json' }, cache: 'no-store' })
  if (response.status === 401) throw new AuthError('The admin token was refused.')
  const body = await response.json().catch(() => ({}))
  if (!response.ok) throw new Error(body.error?.message ?? `HTTP ${response.status}`)
  return body
}

// ── rendering helpers: text only, never HTML from data ────────────────────────────────────────────────────

function el (tag, attributes = {}, ...children) {
  const node = document.createElement(tag)
  for (const [name, value] of Object.entries(attributes)) {
    if (value === undefined || value === null || value === false) continue
    if (name === 'text') node.textContent = String(value)
    else if (name === 'class') node.className = value
    else node.setAttribute(name, value === true ? '' : String(value))
  }
  for (const child of children) if (child !== undefined && child !== null) node.append(child)
  return node
}

function cell (content, attributes = {}) {
  return el('td', attributes, content instanceof window.Node ? content : document.createTextNode(content ?? ''))
}

/** A time of today as its time of day, else with its date; `precise` adds milliseconds (timelines). */
function time (iso, precise = false) {
  if (!iso) return el('span', { class: 'muted', text: '–' })
  const date = new Date(iso)
  const today = date.toDateString() === new Date().toDateString()
  const text = date.toLocaleString([], {
    hour12: false,
    hour: '2-digit',
    minute: '2-digit',
    second: '2-digit',
    ...(precise && { fractionalSecondDigits: 3 }),
    ...(!today && { year: 'numeric', month: 'short', day: 'numeric' }),
  })
  return el('time', { datetime: iso, title: date.toISOString(), text })
}

function badge (status) {
  return el('span', { class: `badge ${status}`, text: status })
}

function processName (id) {
  if (!id) return el('span', { class: 'muted', text: '–' })
  const mine = id === state.processId
  return el('span', { class: mine ? 'process mine' : 'process', title: id, text: mine ? `${id.slice(0, 8)} (this one)` : id.slice(0, 8) })
}

function bytes (n) {
  if (n === null || n === undefined) return ''
  return n < 1024 ? `${n} B` : n < 1024 * 1024 ? `${(n / 1024).toFixed(1)} kB` : `${(n / 1024 / 1024).toFixed(1)} MB`
}

function compact (value) {
  const text = JSON.stringify(value)
  return text.length > 300 ? `${text.slice(0, 300)}…` : text
}

function replaceRows (tbody, rows) {
  tbody.replaceChildren(...rows)
}

// ── connection ────────────────────────────────────────────────────────────────────────────────────────────

function setConnection (text, kind) {
  const node = $('connection')
  node.textContent = text
  node.dataset.state = kind
}

function showLogin (message) {
  state.stream?.abort()
  state.stream = null
  $('main').hidden = true
  $('login').hidden = false
  $('forget').hidden = true
  $('login-error').textContent = message ?? ''
  setConnection('Not connected', 'off')
  $('token').focus()
}

function connect () {
  state.stream?.abort()
  const controller = new AbortController()
  state.stream = controller
  setConnection('Connecting…', 'wait')
  readEvents(controller.signal).then(() => {
    if (!controller.signal.aborted) reconnect('The event stream ended.')
  }, (err) => {
    if (controller.signal.aborted) return
    if (err instanceof AuthError) {
      // A refused token is not tried again on the next load.
      sessionStorage.removeItem(TOKEN_KEY)
      state.token = null
      showLogin(err.message)
    } else reconnect(err.message)
  })
}

function reconnect (why) {
  setConnection(`Disconnected (${why}) · retrying in ${Math.round(state.retryMs / 1000)} s`, 'off')
  const controller = state.stream
  setTimeout(() => { if (state.stream === controller) connect() }, state.retryMs)
  state.retryMs = Math.min(state.retryMs * 2, 15_000)
}

/** Reads `GET /admin/events` as server-sent events until it ends or is aborted. */
async function readEvents (signal) {
  const response = await fetch('/admin/events', { headers: { authorization: `Bearer ${state.token}`, accept: 'text/event-stream' }, cache: 'no-store', signal })
  if (response.status === 401) throw new AuthError('The admin token was refused.')
  if (!response.ok || response.body === null) throw new Error(`HTTP ${response.status}`)
  const reader = response.body.pipeThrough(new TextDecoderStream()).getReader()
  let buffer = ''
  for (;;) {
    const { value, done } = await reader.read()
    if (done) return
    buffer += value
    let end
    while ((end = buffer.indexOf('\n\n')) >= 0) {
      const block = buffer.slice(0, end)
      buffer = buffer.slice(end + 2)
      let event = 'message'
      let data = ''
      for (const line of block.split('\n')) {
        if (line.startsWith('event: ')) event = line.slice(7)
        else if (line.startsWith('data: ')) data += line.slice(6)
      }
      if (data !== '') await dispatch(event, JSON.parse(data))
    }
  }
}

async function dispatch (event, data) {
  if (event === 'hello') {
    state.processId = data.processId
    state.retryMs = 1000
    $('process').textContent = `process ${data.processId}`
    $('login').hidden = true
    $('main').hidden = false
    $('forget').hidden = false
    renderUpstreams(data.upstreams)
    renderProblems(data.problems)
    // Subscribed first, then read: no change falls between the list and the stream.
    await loadTasks()
    if (state.openTask) await refreshTask(state.openTask)
    setConnection('Live', 'live')
  } else if (event === 'task') {
    taskChanged(data.task)
  } else if (event === 'upstreams') {
    renderUpstreams(data.upstreams)
  } else if (event === 'problems') {
    renderProblems(data)
  }
}

// ── upstreams and problems ───────────────────────────────────────────────────────────────────────────────

function renderUpstreams (upstreams) {
  replaceRows($('upstreams').tBodies[0], upstreams.map((u) => el('tr', {},
    el('th', { scope: 'row', text: u.name }),
    cell(u.transport),
    cell(el('span', { class: `badge up-${u.state}`, text: u.state, title: u.reason ?? '' })),
    cell(u.era ?? '–'),
    cell(String(u.sessions), { class: 'num' }),
    cell(u.processes === undefined ? '–' : String(u.processes), { class: 'num' }),
    cell(String(u.calls.active), { class: 'num' }),
    cell(String(u.calls.waiting), { class: 'num' }),
  )))
}

function renderProblems (problems) {
  $('problems-off').hidden = problems !== null
  const counts = problems?.counts ?? []
  const recent = problems?.recent ?? []
  $('problems-empty').hidden = problems === null || counts.length > 0
  $('problem-counts').hidden = counts.length === 0
  $('problem-recent').hidden = recent.length === 0
  replaceRows($('problem-counts').tBodies[0], counts.map((c) => el('tr', {},
    cell(el('span', { class: `badge ${c.kind}`, text: c.kind })), cell(c.code), cell(c.source), cell(String(c.count), { class: 'num' }))))
  replaceRows($('problem-recent').tBodies[0], recent.map((p) => el('tr', {},
    cell(time(new Date(p.at).toISOString())), cell(el('span', { class: `badge ${p.kind}`, text: p.kind })), cell(p.source), cell(p.message, { class: 'message' }))))
}

// ── tasks ─────────────────────────────────────────────────────────────────────────────────────────────────

function filters () {
  return { status: $('status-filter').value, tool: $('tool-filter').value.trim().toLowerCase() }
}

async function loadTasks () {
  const { status } = filters()
  const query = new URLSearchParams({ limit: String(TASK_ROWS) })
  if (status) query.set('status', status)
  const { tasks } = await api(`/admin/tasks?${query}`)
  state.tasks = new Map(tasks.map((task) => [task.id, task]))
  renderTasks()
}

function taskChanged (task) {
  const known = state.tasks.get(task.id)
  // A change announced late (signals can overtake each other) never replaces a newer one.
  if (known && known.lastUpdatedAt > task.lastUpdatedAt) return
  const { status } = filters()
  if (status && task.status !== status) state.tasks.delete(task.id)
  else state.tasks.set(task.id, task)
  renderTasks()
  if (state.openTask === task.id) {
    clearTimeout(state.detailTimer)
    state.detailTimer = setTimeout(() => { refreshTask(task.id).catch(() => {}) }, 100)
  }
}

function renderTasks () {
  const { tool } = filters()
  const rows = [...state.tasks.values()]
    .filter((task) => !tool || `${task.upstream}/${task.tool}`.toLowerCase().includes(tool))
    .sort((a, b) => (a.createdAt < b.createdAt ? 1 : a.createdAt > b.createdAt ? -1 : a.id < b.id ? 1 : -1))
    .slice(0, TASK_ROWS)
  replaceRows($('tasks').tBodies[0], rows.map((task) => el('tr', { 'data-task': task.id, 'data-status': task.status, class: task.id === state.openTask ? 'open' : undefined },
    el('th', { scope: 'row' }, el('button', { type: 'button', class: 'link', 'data-open': task.id, 'aria-label': `Open task ${task.id}`, text: task.id.slice(0, 10) })),
    cell(badge(task.status)),
    cell(`${task.upstream} / ${task.tool}`),
    cell(task.principal),
    cell(time(task.createdAt)),
    cell(time(task.lastUpdatedAt)),
    cell(task.statusMessage ?? '', { class: 'message' }),
  )))
  $('tasks-empty').hidden = rows.length > 0
  $('task-count').textContent = `(${rows.length}${rows.length === TASK_ROWS ? '+' : ''})`
}

// ── one task ──────────────────────────────────────────────────────────────────────────────────────────────

const EVENT_TEXT = {
  created: () => ['Created', ''],
  status: (e) => [`→ ${e.status}`, [e.statusMessage, e.resultBytes !== undefined ? `result ${bytes(e.resultBytes)}` : ''].filter(Boolean).join(' · ')],
  input: (e) => ['Input requested', `${e.method} (${e.key})`],
  input_settled: (e) => [e.state === 'answered' ? 'Input answered' : 'Input expired', e.key],
  claimed: (e) => ['Taken over', `from process ${e.from}`],
}

function outcomeText (task) {
  const { outcome } = task
  if (outcome === null) return '–'
  const size = bytes(task.resultBytes)
  if (outcome.kind === 'error') return `JSON-RPC error ${outcome.code}: ${outcome.message} · ${size}`
  return `${outcome.isError ? 'tool result with isError' : 'tool result'} · ${size}`
}

/** Reads the open task again after a change; nothing if it was closed or another was opened meanwhile. */
async function refreshTask (id) {
  const task = await api(`/admin/tasks/${encodeURIComponent(id)}`)
  if (state.openTask === id) renderTask(task, false)
}

async function showTask (id, focus = true) {
  $('detail-error').textContent = ''
  renderTask(await api(`/admin/tasks/${encodeURIComponent(id)}`), focus)
}

function renderTask (task, focus) {
  const id = task.id
  state.openTask = id
  $('detail').hidden = false
  $('detail-title').textContent = `Task ${task.id}`
  $('cancel').hidden = TERMINAL.has(task.status)
  $('cancel').disabled = false
  const facts = [
    ['Status', badge(task.status)], ['Message', task.statusMessage ?? '–'], ['Tool', `${task.upstream} / ${task.tool}`],
    ['Principal', task.principal], ['Era', task.era], ['Created', time(task.createdAt)], ['Updated', time(task.lastUpdatedAt)],
    ['Runs on', processName(task.owner)], ['Result', outcomeText(task)],
  ]
  $('summary').replaceChildren(...facts.flatMap(([term, value]) => [el('dt', { text: term }), el('dd', {}, value)]))
  replaceRows($('timeline').tBodies[0], task.timeline.map((entry) => {
    const [what, details] = (EVENT_TEXT[entry.type] ?? (() => [entry.type, '']))(entry)
    return el('tr', { 'data-event': entry.type }, cell(time(entry.at, true)), cell(what), cell(details, { class: 'message' }), cell(processName(entry.process)))
  }))
  replaceRows($('inputs').tBodies[0], task.inputs.map((input) => el('tr', { 'data-input': input.state },
    cell(time(input.createdAt, true)), cell(input.method), cell(badge(input.state)),
    cell(typeof input.params.message === 'string' ? input.params.message : compact(input.params), { class: 'message' }),
    cell(input.answer === null ? '–' : compact(input.answer.result ?? input.answer.error), { class: 'message' }))))
  $('inputs-empty').hidden = task.inputs.length > 0
  $('inputs').hidden = task.inputs.length === 0
  for (const row of $('tasks').tBodies[0].rows) row.classList.toggle('open', row.dataset.task === id)
  if (focus) $('detail-title').focus()
}

async function cancelOpenTask () {
  const id = state.openTask
  if (!id || !window.confirm(`Cancel task ${id}? Its upstream call is stopped and its client sees it cancelled.`)) return
  $('cancel').disabled = true
  try {
    await api(`/admin/tasks/${encodeURIComponent(id)}/cancel`, { method: 'POST' })
    // The button goes away with the task's end: the focus goes back to the detail's heading.
    await showTask(id, true)
  } catch (err) {
    $('detail-error').textContent = err.message
    $('cancel').disabled = false
  }
}

// ── wiring ────────────────────────────────────────────────────────────────────────────────────────────────

function start () {
  $('login').addEventListener('submit', (event) => {
    event.preventDefault()
    state.token = $('token').value.trim()
    $('token').value = ''
    sessionStorage.setItem(TOKEN_KEY, state.token)
    connect()
  })
  $('forget').addEventListener('click', () => {
    sessionStorage.removeItem(TOKEN_KEY)
    state.token = null
    showLogin('')
  })
  $('filters').addEventListener('submit', (event) => event.preventDefault())
  $('status-filter').addEventListener('change', () => { loadTasks().catch((err) => { $('detail-error').textContent = err.message }) })
  $('tool-filter').addEventListener('input', renderTasks)
  $('tasks').addEventListener('click', (event) => {
    const id = event.target.closest('[data-open]')?.dataset.open
    if (id) showTask(id).catch((err) => { $('detail-error').textContent = err.message })
  })
  $('cancel').addEventListener('click', () => { cancelOpenTask() })
  const closeDetail = () => {
    clearTimeout(state.detailTimer)
    state.openTask = null
    $('detail').hidden = true
    renderTasks()
    $('tasks-title').focus()
  }
  $('close-detail').addEventListener('click', closeDetail)
  $('detail').addEventListener('keydown', (event) => { if (event.key === 'Escape') closeDetail() })
  if (state.token) connect()
  else showLogin('')
}

start()

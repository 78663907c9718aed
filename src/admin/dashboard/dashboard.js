// The live dashboard of the admin API. Plain browser JavaScript, no build step. The admin token is asked for
// once, kept in this tab's sessionStorage and sent in the Authorization header of every request, the event
// stream included (read with fetch(), since EventSource cannot send headers); it never goes into a URL.

import { TASK_STATUSES, TERMINAL_STATUSES } from './task-states.js'
import { $, renderProblems, renderTaskDetail, renderTaskRows, renderUpstreams, setProcess, tickElapsed } from './dashboard-view.js'

const TOKEN_KEY = 'mcp-task-gateway.admin-token'
/** Tasks shown (and read at connect): the newest ones. */
const TASK_ROWS = 200

const state = {
  token: sessionStorage.getItem(TOKEN_KEY),
  /** id → task summary, as GET /admin/tasks lists them. */
  tasks: new Map(),
  /** id → the last progress the feed reported for a running task (since the page opened). */
  progress: new Map(),
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
    setProcess(data.processId)
    state.retryMs = 1000
    $('process').textContent = `process ${data.processId}`
    $('login').hidden = true
    $('main').hidden = false
    $('forget').hidden = false
    renderUpstreams(data.upstreams)
    renderProblems(data.problems)
    // Subscribed first, then read: no change falls between the list and the stream.
    await loadTasks()
    // The open task may have passed its TTL meanwhile: its detail then stays as it was.
    if (state.openTask) await refreshTask(state.openTask).catch((err) => { if (err instanceof AuthError) throw err })
    setConnection('Live', 'live')
  } else if (event === 'task') {
    if (data.change === 'progress' && data.progress) state.progress.set(data.task.id, data.progress)
    taskChanged(data.task)
  } else if (event === 'upstreams') {
    renderUpstreams(data.upstreams)
  } else if (event === 'problems') {
    renderProblems(data)
  }
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
  if (TERMINAL_STATUSES.includes(task.status)) state.progress.delete(task.id)
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
  renderTaskRows(rows, state.openTask, rows.length === TASK_ROWS, state.progress)
}

// ── one task ──────────────────────────────────────────────────────────────────────────────────────────────

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
  state.openTask = task.id
  renderTaskDetail(task, state.progress.get(task.id))
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
  for (const status of TASK_STATUSES) {
    const option = document.createElement('option')
    option.value = option.textContent = status
    $('status-filter').append(option)
  }
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

// Running tasks' elapsed times move on every second, without a reload of the list.
setInterval(tickElapsed, 1000)

/* infertap._chatsse: the plainest streamed chat answer read in C, the twin of chat_stream._typed.
 *
 * The decode of a large capture spends most of its time reading streamed chat answers, and most of
 * that in Python's loops over their events. This reads the same bodies with yyjson (native/yyjson,
 * vendored) and gives back the pieces that _typed's loop gathers; chat_stream._native folds them
 * into the answer with _typed's own tail, so what an answer means is said once, in Python.
 *
 * read(body, ends) answers only where _typed answers, and as it does; on anything else it returns
 * None and the Python readers read the body: a shape msgspec's structs refuse, a duplicated field,
 * a number that yyjson can't hold exactly, text that is not UTF-8, JSON nested deeper than
 * MAX_DEPTH. Declining is always safe; a different answer is a defect (tests/apis/test_chat_stream.py
 * holds it to _typed). Framing checks are _typed's, restated over the bytes: see frame().
 */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <string.h>

#include "yyjson.h"

#define OK 0
#define DECLINE 1
#define ERROR (-1)

/* Deeper JSON is declined: msgspec raises RecursionError near 10,000 levels, even in a field it skips. */
#define MAX_DEPTH 256

static const char DONE_BLOCK[] = "data: [DONE]";
static const char *const OBJECTS[] = {"chat.completion", "chat.completion.chunk", "text_completion"};

/* -- growing UTF-8 text --------------------------------------------------------------------------- */

typedef struct {
    char *p;
    size_t len, cap;
} text;

static int text_add(text *t, const char *s, size_t n)
{
    if (t->len + n > t->cap) {
        size_t cap = t->cap ? t->cap : 64;
        while (cap < t->len + n)
            cap *= 2;
        char *p = PyMem_Realloc(t->p, cap);
        if (p == NULL) {
            PyErr_NoMemory();
            return ERROR;
        }
        t->p = p;
        t->cap = cap;
    }
    if (n)
        memcpy(t->p + t->len, s, n);
    t->len += n;
    return OK;
}

/* A str of UTF-8 bytes; text that is not (yyjson checked it, so never) declines. */
static int str_of(const char *s, size_t n, PyObject **out)
{
    *out = PyUnicode_DecodeUTF8(s, (Py_ssize_t)n, NULL);
    if (*out != NULL)
        return OK;
    if (PyErr_ExceptionMatches(PyExc_UnicodeDecodeError)) {
        PyErr_Clear();
        return DECLINE;
    }
    return ERROR;
}

static int str_val(yyjson_val *v, PyObject **out)
{
    return str_of(yyjson_get_str(v), yyjson_get_len(v), out);
}

/* -- JSON values as msgspec's Any reads them ------------------------------------------------------ */

static int to_python(yyjson_val *v, int depth, PyObject **out);

static int dict_of(yyjson_val *obj, int depth, PyObject **out)
{
    PyObject *d = PyDict_New();
    if (d == NULL)
        return ERROR;
    size_t idx, max;
    yyjson_val *key, *val;
    yyjson_obj_foreach(obj, idx, max, key, val)
    {
        PyObject *k, *item;
        int rc = str_val(key, &k);
        if (rc != OK) {
            Py_DECREF(d);
            return rc;
        }
        rc = to_python(val, depth + 1, &item);
        if (rc != OK) {
            Py_DECREF(k);
            Py_DECREF(d);
            return rc;
        }
        Py_ssize_t before = PyDict_GET_SIZE(d);
        rc = PyDict_SetItem(d, k, item);
        Py_DECREF(k);
        Py_DECREF(item);
        if (rc < 0) {
            Py_DECREF(d);
            return ERROR;
        }
        if (PyDict_GET_SIZE(d) == before) { /* a key said twice: msgspec keeps the last, where it stood first */
            Py_DECREF(d);
            return DECLINE;
        }
    }
    *out = d;
    return OK;
}

static int to_python(yyjson_val *v, int depth, PyObject **out)
{
    if (depth > MAX_DEPTH)
        return DECLINE;
    switch (yyjson_get_tag(v)) {
    case YYJSON_TYPE_NULL | YYJSON_SUBTYPE_NONE:
        *out = Py_NewRef(Py_None);
        return OK;
    case YYJSON_TYPE_BOOL | YYJSON_SUBTYPE_TRUE:
        *out = Py_NewRef(Py_True);
        return OK;
    case YYJSON_TYPE_BOOL | YYJSON_SUBTYPE_FALSE:
        *out = Py_NewRef(Py_False);
        return OK;
    case YYJSON_TYPE_NUM | YYJSON_SUBTYPE_UINT:
        *out = PyLong_FromUnsignedLongLong(yyjson_get_uint(v));
        return *out ? OK : ERROR;
    case YYJSON_TYPE_NUM | YYJSON_SUBTYPE_SINT:
        *out = PyLong_FromLongLong(yyjson_get_sint(v));
        return *out ? OK : ERROR;
    case YYJSON_TYPE_NUM | YYJSON_SUBTYPE_REAL:
        *out = PyFloat_FromDouble(yyjson_get_real(v));
        return *out ? OK : ERROR;
    case YYJSON_TYPE_STR | YYJSON_SUBTYPE_NONE:
    case YYJSON_TYPE_STR | YYJSON_SUBTYPE_NOESC:
        return str_val(v, out);
    case YYJSON_TYPE_ARR | YYJSON_SUBTYPE_NONE: {
        PyObject *list = PyList_New((Py_ssize_t)yyjson_arr_size(v));
        if (list == NULL)
            return ERROR;
        size_t idx, max;
        yyjson_val *item;
        yyjson_arr_foreach(v, idx, max, item)
        {
            PyObject *o;
            int rc = to_python(item, depth + 1, &o);
            if (rc != OK) {
                Py_DECREF(list);
                return rc;
            }
            PyList_SET_ITEM(list, (Py_ssize_t)idx, o);
        }
        *out = list;
        return OK;
    }
    case YYJSON_TYPE_OBJ | YYJSON_SUBTYPE_NONE:
        return dict_of(v, depth, out);
    default: /* raw: an integer beyond 64 bits or a number beyond a double */
        return DECLINE;
    }
}

/* Python's truth of the value msgspec would give (a raw number is never false). */
static int truthy(yyjson_val *v)
{
    if (v == NULL)
        return 0;
    switch (yyjson_get_type(v)) {
    case YYJSON_TYPE_NULL:
        return 0;
    case YYJSON_TYPE_BOOL:
        return yyjson_get_bool(v);
    case YYJSON_TYPE_NUM:
        return yyjson_is_real(v) ? yyjson_get_real(v) != 0.0 : yyjson_get_uint(v) != 0;
    case YYJSON_TYPE_STR:
    case YYJSON_TYPE_RAW:
        return yyjson_get_len(v) != 0;
    case YYJSON_TYPE_ARR:
        return yyjson_arr_size(v) != 0;
    case YYJSON_TYPE_OBJ:
        return yyjson_obj_size(v) != 0;
    }
    return 1;
}

/* -- the fields of msgspec's structs (chat_stream._Event and the rest) ---------------------------- */

/* The fields of one object that a struct reads, by name; any other is skipped, as msgspec skips it.
 * A field said twice declines (msgspec keeps the last). */
static int fields_of(yyjson_val *obj, const char *const *names, int n, yyjson_val **found)
{
    if (!yyjson_is_obj(obj))
        return DECLINE;
    for (int i = 0; i < n; i++)
        found[i] = NULL;
    size_t idx, max;
    yyjson_val *key, *val;
    yyjson_obj_foreach(obj, idx, max, key, val)
    {
        for (int i = 0; i < n; i++) {
            if (yyjson_equals_str(key, names[i])) {
                if (found[i] != NULL)
                    return DECLINE;
                found[i] = val;
                break;
            }
        }
    }
    return OK;
}

static int is_null(yyjson_val *v) { return v == NULL || yyjson_is_null(v); }
static int str_or_null(yyjson_val *v) { return is_null(v) || yyjson_is_str(v); }
static int nonempty_str(yyjson_val *v) { return v != NULL && yyjson_is_str(v) && yyjson_get_len(v) != 0; }
/* An int that msgspec reads and C holds: a 64-bit one (an int beyond is raw). */
static int is_int(yyjson_val *v) { return v != NULL && (yyjson_is_sint(v) || (yyjson_is_uint(v) && yyjson_get_uint(v) <= LLONG_MAX)); }
static long long int_of(yyjson_val *v) { return yyjson_is_sint(v) ? yyjson_get_sint(v) : (long long)yyjson_get_uint(v); }

enum { E_ID, E_OBJECT, E_MODEL, E_CHOICES, E_USAGE, E_FINGERPRINT, E_TIMINGS, E_N };
static const char *const EVENT[] = {"id", "object", "model", "choices", "usage", "system_fingerprint", "timings"};
enum { C_INDEX, C_DELTA, C_TEXT, C_FINISH, C_STOP_REASON, C_MATCHED_STOP, C_MESSAGE, C_LOGPROBS, C_TOKEN_IDS, C_N };
static const char *const CHOICE[] = {"index", "delta", "text", "finish_reason", "stop_reason", "matched_stop", "message", "logprobs", "token_ids"};
enum { D_CONTENT, D_REASONING_CONTENT, D_REASONING, D_TOOL_CALLS, D_N };
static const char *const DELTA[] = {"content", "reasoning_content", "reasoning", "tool_calls"};
enum { T_INDEX, T_ID, T_FUNCTION, T_N };
static const char *const CALL[] = {"index", "id", "function"};
enum { F_NAME, F_ARGUMENTS, F_N };
static const char *const FUNCTION[] = {"name", "arguments"};

/* -- one reading ---------------------------------------------------------------------------------- */

typedef struct {
    long long index;
    PyObject *id; /* a str, or NULL for None */
    text name, arguments;
} call;

typedef struct {
    PyObject *at, *datas, *contents, *reasonings, *tools, *finishes, *usages;
    call *calls;
    size_t ncalls, capcalls;
    PyObject *model, *response_id, *fingerprint, *timings, *stop; /* NULL: None */
    int response_id_true;
    PyObject *stop_reason; /* the last said (None said included) */
    int stop_reason_said;
    PyObject *matched; /* the last said that was not null */
    int matched_said;
    text content, reasoning; /* one event's */
} reading;

static void reading_free(reading *r)
{
    Py_XDECREF(r->at);
    Py_XDECREF(r->datas);
    Py_XDECREF(r->contents);
    Py_XDECREF(r->reasonings);
    Py_XDECREF(r->tools);
    Py_XDECREF(r->finishes);
    Py_XDECREF(r->usages);
    for (size_t i = 0; i < r->ncalls; i++) {
        Py_XDECREF(r->calls[i].id);
        PyMem_Free(r->calls[i].name.p);
        PyMem_Free(r->calls[i].arguments.p);
    }
    PyMem_Free(r->calls);
    Py_XDECREF(r->model);
    Py_XDECREF(r->response_id);
    Py_XDECREF(r->fingerprint);
    Py_XDECREF(r->timings);
    Py_XDECREF(r->stop);
    Py_XDECREF(r->stop_reason);
    Py_XDECREF(r->matched);
    PyMem_Free(r->content.p);
    PyMem_Free(r->reasoning.p);
}

static int append(PyObject *list, PyObject *item)
{
    if (item == NULL)
        return ERROR;
    int rc = PyList_Append(list, item);
    Py_DECREF(item);
    return rc < 0 ? ERROR : OK;
}

static call *call_at(reading *r, long long index)
{
    for (size_t i = 0; i < r->ncalls; i++)
        if (r->calls[i].index == index)
            return &r->calls[i];
    if (r->ncalls == r->capcalls) {
        size_t cap = r->capcalls ? 2 * r->capcalls : 4;
        call *calls = PyMem_Realloc(r->calls, cap * sizeof(call));
        if (calls == NULL) {
            PyErr_NoMemory();
            return NULL;
        }
        r->calls = calls;
        r->capcalls = cap;
    }
    call *c = &r->calls[r->ncalls++];
    memset(c, 0, sizeof(*c));
    c->index = index;
    return c;
}

/* A stop_reason or matched_stop that msgspec reads (int | str | None), as Python. */
static int stop_said(yyjson_val *v, PyObject **out)
{
    if (yyjson_is_null(v)) {
        *out = Py_NewRef(Py_None);
        return OK;
    }
    if (yyjson_is_str(v))
        return str_val(v, out);
    if (!is_int(v))
        return DECLINE;
    *out = PyLong_FromLongLong(int_of(v));
    return *out ? OK : ERROR;
}

/* One tool-call piece of a delta: _typed's loop over delta.tool_calls. */
static int read_call(reading *r, yyjson_val *piece, size_t position, long *carried)
{
    yyjson_val *f[T_N], *fn[F_N];
    int rc = fields_of(piece, CALL, T_N, f);
    if (rc != OK)
        return rc;
    if ((f[T_INDEX] != NULL && !is_int(f[T_INDEX])) || !str_or_null(f[T_ID]))
        return DECLINE;
    int has_function = !is_null(f[T_FUNCTION]);
    if (has_function) {
        if ((rc = fields_of(f[T_FUNCTION], FUNCTION, F_N, fn)) != OK)
            return rc;
        if (!str_or_null(fn[F_NAME]) || !str_or_null(fn[F_ARGUMENTS]))
            return DECLINE;
    }
    call *c = call_at(r, f[T_INDEX] == NULL ? (long long)position : int_of(f[T_INDEX]));
    if (c == NULL)
        return ERROR;
    if (nonempty_str(f[T_ID])) {
        PyObject *id;
        if ((rc = str_val(f[T_ID], &id)) != OK)
            return rc;
        Py_XSETREF(c->id, id);
    }
    if (has_function) {
        int said = 0;
        for (int i = 0; i < F_N; i++) {
            if (nonempty_str(fn[i])) {
                if (text_add(i == F_NAME ? &c->name : &c->arguments, yyjson_get_str(fn[i]), yyjson_get_len(fn[i])) != OK)
                    return ERROR;
                said = 1;
            }
        }
        *carried += said; /* an empty piece carries no token (ToolCallPart.carries) */
    }
    return OK;
}

/* One choice of an event: _typed's loop body. */
static int read_choice(reading *r, yyjson_val *choice, long *carried, yyjson_val **finish)
{
    yyjson_val *f[C_N], *d[D_N];
    int rc = fields_of(choice, CHOICE, C_N, f);
    if (rc != OK)
        return rc;
    if (f[C_MESSAGE] != NULL || (f[C_LOGPROBS] != NULL && !yyjson_is_null(f[C_LOGPROBS])) ||
        (f[C_TOKEN_IDS] != NULL && !yyjson_is_null(f[C_TOKEN_IDS])))
        return DECLINE; /* a message, logprobs, token ids: the loop's */
    if (f[C_INDEX] != NULL && !(is_int(f[C_INDEX]) && int_of(f[C_INDEX]) == 0))
        return DECLINE; /* another choice (n > 1), or an index msgspec refuses */
    if (!(is_null(f[C_DELTA]) || yyjson_is_obj(f[C_DELTA])) || !str_or_null(f[C_TEXT]) || !str_or_null(f[C_FINISH]))
        return DECLINE;
    if (!is_null(f[C_DELTA])) {
        if ((rc = fields_of(f[C_DELTA], DELTA, D_N, d)) != OK)
            return rc;
        if (!str_or_null(d[D_CONTENT]) || !str_or_null(d[D_REASONING_CONTENT]) || !str_or_null(d[D_REASONING]) ||
            !(is_null(d[D_TOOL_CALLS]) || yyjson_is_arr(d[D_TOOL_CALLS])))
            return DECLINE;
    }
    else {
        for (int i = 0; i < D_N; i++)
            d[i] = NULL;
    }
    PyObject *said;
    yyjson_val *stop = nonempty_str(f[C_STOP_REASON]) ? f[C_STOP_REASON] : nonempty_str(f[C_MATCHED_STOP]) ? f[C_MATCHED_STOP] : NULL;
    if (stop != NULL) {
        if ((rc = str_val(stop, &said)) != OK)
            return rc;
        Py_XSETREF(r->stop, said);
    }
    if (f[C_STOP_REASON] != NULL) {
        if ((rc = stop_said(f[C_STOP_REASON], &said)) != OK)
            return rc;
        Py_XSETREF(r->stop_reason, said);
        r->stop_reason_said = 1;
    }
    if (f[C_MATCHED_STOP] != NULL) {
        if ((rc = stop_said(f[C_MATCHED_STOP], &said)) != OK)
            return rc;
        r->matched_said = 1;
        if (said == Py_None) /* a later null does not undo a value (openai.matched_stop_after) */
            Py_DECREF(said);
        else
            Py_XSETREF(r->matched, said);
    }
    if (yyjson_is_str(d[D_CONTENT]) && text_add(&r->content, yyjson_get_str(d[D_CONTENT]), yyjson_get_len(d[D_CONTENT])) != OK)
        return ERROR;
    yyjson_val *a = d[D_REASONING_CONTENT], *b = d[D_REASONING];
    if (yyjson_is_str(a) || yyjson_is_str(b)) { /* openai.both_reasoning: once when both say the same, else both */
        size_t na = yyjson_is_str(a) ? yyjson_get_len(a) : 0, nb = yyjson_is_str(b) ? yyjson_get_len(b) : 0;
        if (na && text_add(&r->reasoning, yyjson_get_str(a), na) != OK)
            return ERROR;
        if (nb && !(na == nb && memcmp(yyjson_get_str(a), yyjson_get_str(b), na) == 0) &&
            text_add(&r->reasoning, yyjson_get_str(b), nb) != OK)
            return ERROR;
    }
    if (yyjson_is_arr(d[D_TOOL_CALLS])) {
        size_t idx, max;
        yyjson_val *piece;
        yyjson_arr_foreach(d[D_TOOL_CALLS], idx, max, piece)
        {
            if ((rc = read_call(r, piece, idx, carried)) != OK)
                return rc;
        }
    }
    if (yyjson_is_str(f[C_TEXT]) && text_add(&r->content, yyjson_get_str(f[C_TEXT]), yyjson_get_len(f[C_TEXT])) != OK)
        return ERROR;
    if (nonempty_str(f[C_FINISH]))
        *finish = f[C_FINISH];
    return OK;
}

static int is_chat_object(yyjson_val *v)
{
    for (size_t i = 0; i < sizeof(OBJECTS) / sizeof(*OBJECTS); i++)
        if (yyjson_is_str(v) && yyjson_equals_str(v, OBJECTS[i]))
            return 1;
    return 0;
}

/* One event's payload: its columns appended, what the answer keeps of it kept. */
static int read_event(reading *r, yyjson_val *event)
{
    yyjson_val *f[E_N];
    int rc = fields_of(event, EVENT, E_N, f);
    if (rc != OK)
        return rc;
    if (!str_or_null(f[E_ID]) || !str_or_null(f[E_OBJECT]) || !str_or_null(f[E_MODEL]) ||
        !(is_null(f[E_CHOICES]) || yyjson_is_arr(f[E_CHOICES])) || !(is_null(f[E_USAGE]) || yyjson_is_obj(f[E_USAGE])) ||
        !(is_null(f[E_TIMINGS]) || yyjson_is_obj(f[E_TIMINGS])))
        return DECLINE;
    if (is_null(f[E_CHOICES]) && !is_chat_object(f[E_OBJECT]))
        return DECLINE; /* the loop reads it, for an error message */
    long carried = 0;
    yyjson_val *finish = NULL;
    r->content.len = r->reasoning.len = 0;
    if (yyjson_is_arr(f[E_CHOICES])) {
        size_t idx, max;
        yyjson_val *choice;
        yyjson_arr_foreach(f[E_CHOICES], idx, max, choice)
        {
            if ((rc = read_choice(r, choice, &carried, &finish)) != OK)
                return rc;
        }
    }
    PyObject *o;
    if ((rc = str_of(r->content.p, r->content.len, &o)) != OK || (rc = append(r->contents, o)) != OK)
        return rc;
    if ((rc = str_of(r->reasoning.p, r->reasoning.len, &o)) != OK || (rc = append(r->reasonings, o)) != OK)
        return rc;
    if ((rc = append(r->tools, PyLong_FromLong(carried))) != OK)
        return rc;
    if (finish == NULL)
        o = Py_NewRef(Py_None);
    else if ((rc = str_val(finish, &o)) != OK)
        return rc;
    if ((rc = append(r->finishes, o)) != OK)
        return rc;
    if (truthy(f[E_USAGE])) {
        if ((rc = dict_of(f[E_USAGE], 1, &o)) != OK)
            return rc;
    }
    else
        o = Py_NewRef(Py_None);
    if ((rc = append(r->usages, o)) != OK)
        return rc;
    /* model = e.model or model; response_id = response_id or e.id; and so on, as _typed keeps them */
    if (nonempty_str(f[E_MODEL])) {
        if ((rc = str_val(f[E_MODEL], &o)) != OK)
            return rc;
        Py_XSETREF(r->model, o);
    }
    if (!r->response_id_true) {
        o = NULL;
        if (yyjson_is_str(f[E_ID]) && (rc = str_val(f[E_ID], &o)) != OK)
            return rc;
        Py_XSETREF(r->response_id, o);
        r->response_id_true = nonempty_str(f[E_ID]);
    }
    if (truthy(f[E_FINGERPRINT])) {
        if ((rc = to_python(f[E_FINGERPRINT], 1, &o)) != OK)
            return rc;
        Py_XSETREF(r->fingerprint, o);
    }
    if (truthy(f[E_TIMINGS])) {
        if ((rc = dict_of(f[E_TIMINGS], 1, &o)) != OK)
            return rc;
        Py_XSETREF(r->timings, o);
    }
    return OK;
}

/* -- the framing: _typed's checks on the body's bytes ---------------------------------------------- */

static int is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\x0b' || c == '\x0c'; }

static int has_prefix(const char *p, size_t n, const char *prefix, size_t k) { return n >= k && memcmp(p, prefix, k) == 0; }

/* The first `k` bytes of `what` in p[0:n], or NULL (memmem, which not every C library has). */
static const char *find(const char *p, size_t n, const char *what, size_t k)
{
    const char *end = p + n;
    while ((size_t)(end - p) >= k && (p = memchr(p, what[0], (size_t)(end - p) - k + 1)) != NULL) {
        if (memcmp(p, what, k) == 0)
            return p;
        p++;
    }
    return NULL;
}

/* Whether chat_stream.LOOP_ONLY matches the body: what _typed leaves to the loop, found as that
 * regular expression finds it (\s is its bytes' whitespace, is_space's): at a quote, one of the
 * keys below, its closing quote, a colon and how its value starts. */
static int loop_only(const char *body, size_t n)
{
    static const struct {
        const char *key;
        size_t len;
        char value; /* the value's first byte: '"' a string, '{' an object, '[' an array */
    } keys[] = {
        {"refusal\"", 8, '"'}, {"function_call\"", 14, '{'}, {"custom\"", 7, '{'}, {"audio\"", 6, '{'},
        {"annotations\"", 12, '['}, {"images\"", 7, '['}, {"error\"", 6, 'e'},
    };
    const char *end = body + n, *p = body;
    while ((p = memchr(p, '"', (size_t)(end - p))) != NULL) {
        p++;
        for (size_t k = 0; k < sizeof(keys) / sizeof(*keys); k++) {
            if ((size_t)(end - p) < keys[k].len || memcmp(p, keys[k].key, keys[k].len) != 0)
                continue;
            const char *q = p + keys[k].len;
            while (q < end && is_space(*q))
                q++;
            if (q == end || *q++ != ':')
                break;
            while (q < end && is_space(*q))
                q++;
            if (q == end)
                break;
            switch (keys[k].value) {
            case '"':
            case '{':
                if (*q == keys[k].value)
                    return 1;
                break;
            case 'e': /* error: an object, or a string that is not empty */
                if (*q == '{' || (*q == '"' && q + 1 < end && q[1] != '"'))
                    return 1;
                break;
            case '[': /* annotations: an object first; images: anything first */
                if (*q++ != '[')
                    break;
                while (q < end && is_space(*q))
                    q++;
                if (q < end && (k == 4 ? *q == '{' : *q != ']'))
                    return 1;
                break;
            }
            break;
        }
    }
    return 0;
}

/* Whether JSON that yyjson accepted nests deeper than MAX_DEPTH (only a long payload can). */
static int too_deep(const char *p, size_t n)
{
    int depth = 0, in_string = 0;
    for (size_t i = 0; i < n; i++) {
        char c = p[i];
        if (in_string) {
            if (c == '\\')
                i++;
            else if (c == '"')
                in_string = 0;
        }
        else if (c == '"')
            in_string = 1;
        else if (c == '[' || c == '{') {
            if (++depth > MAX_DEPTH)
                return 1;
        }
        else if (c == ']' || c == '}')
            depth--;
    }
    return 0;
}

/* The blocks of a body split at each "\n\n" as bytes.split splits it, where _typed would read them:
 * each block one "data: " line, the last "data: [DONE]", the only "[DONE]" of the body, only
 * whitespace after it, the last three chunks ending with it. Their starts and lengths into *starts
 * (events only, [DONE]'s dropped); the count, or -1 where _typed declines (-2: no memory). */
static Py_ssize_t frame(const char *body, size_t n, const Py_ssize_t *ends, Py_ssize_t nends, size_t **starts)
{
    size_t tail = nends >= 4 ? (size_t)ends[nends - 4] : 0, last = n;
    while (last > tail && is_space(body[last - 1]))
        last--;
    if (last < tail + 6 || memcmp(body + last - 6, "[DONE]", 6) != 0)
        return -1; /* b"".join(pieces[-3:]).rstrip().endswith(b"[DONE]") */
    const char *done = find(body, n, "[DONE]", 6);
    if (done == NULL || find(done + 1, n - (size_t)(done + 1 - body), "[DONE]", 6) != NULL)
        return -1;
    size_t cap = 64, count = 0, pos = 0;
    size_t *s = PyMem_Malloc(cap * sizeof(size_t));
    if (s == NULL)
        return -2;
    const char *cut;
    while ((cut = find(body + pos, n - pos, "\n\n", 2)) != NULL) {
        size_t at = (size_t)(cut - body), len = at - pos;
        if (!has_prefix(body + pos, len, "data: ", 6) || memchr(body + pos, '\n', len) != NULL)
            goto decline; /* a block of another kind, or of several lines */
        if (count == cap) {
            size_t *more = PyMem_Realloc(s, 2 * cap * sizeof(size_t));
            if (more == NULL) {
                PyMem_Free(s);
                return -2;
            }
            s = more;
            cap *= 2;
        }
        s[count++] = pos;
        pos = at + 2;
    }
    for (size_t i = pos; i < n; i++)
        if (!is_space(body[i]))
            goto decline; /* more after the last blank line */
    if (count < 2 || s[count - 1] + sizeof(DONE_BLOCK) + 1 != pos || memcmp(body + s[count - 1], DONE_BLOCK, sizeof(DONE_BLOCK) - 1) != 0)
        goto decline; /* no event, or no [DONE] block last */
    *starts = s;
    return (Py_ssize_t)count - 1;
decline:
    PyMem_Free(s);
    return -1;
}

/* -- read(body, ends) ----------------------------------------------------------------------------- */

static int read_events(reading *r, const char *body, const Py_ssize_t *ends, Py_ssize_t nends, const size_t *starts,
                       Py_ssize_t count)
{
    int rc = OK;
    yyjson_alc *alc = yyjson_alc_dyn_new();
    if (alc == NULL) {
        PyErr_NoMemory();
        return ERROR;
    }
    Py_ssize_t chunk = 0;
    for (Py_ssize_t i = 0; i < count && rc == OK; i++) {
        size_t end = starts[i + 1] - 2; /* the blank line that ends the event, at end and end + 1 */
        while (chunk < nends && (size_t)ends[chunk] <= end + 1)
            chunk++; /* bisect_right(ends, end + 1): the chunk the event was complete in */
        const char *data = body + starts[i] + 6;
        size_t len = end - starts[i] - 6;
        PyObject *o;
        if ((rc = append(r->at, PyLong_FromSsize_t(chunk))) != OK)
            break;
        if ((rc = str_of(data, len, &o)) != OK || (rc = append(r->datas, o)) != OK)
            break;
        yyjson_read_err err;
        yyjson_doc *doc = yyjson_read_opts((char *)data, len, YYJSON_READ_BIGNUM_AS_RAW, alc, &err);
        if (doc == NULL) {
            rc = err.code == YYJSON_READ_ERROR_MEMORY_ALLOCATION ? (PyErr_NoMemory(), ERROR) : DECLINE;
            break;
        }
        if (len > 2 * MAX_DEPTH && too_deep(data, len))
            rc = DECLINE;
        else
            rc = read_event(r, yyjson_doc_get_root(doc));
        yyjson_doc_free(doc);
    }
    yyjson_alc_dyn_free(alc);
    return rc;
}

/* The calls by index, each {"id", "name", "arguments"} as _typed's slots. */
static PyObject *calls_of(reading *r)
{
    PyObject *calls = PyDict_New();
    for (size_t i = 0; calls != NULL && i < r->ncalls; i++) {
        call *c = &r->calls[i];
        PyObject *name = PyUnicode_DecodeUTF8(c->name.p, (Py_ssize_t)c->name.len, NULL);
        PyObject *arguments = PyUnicode_DecodeUTF8(c->arguments.p, (Py_ssize_t)c->arguments.len, NULL);
        PyObject *index = PyLong_FromLongLong(c->index);
        PyObject *slot = name && arguments ? Py_BuildValue("{sOsOsO}", "id", c->id ? c->id : Py_None, "name", name, "arguments", arguments) : NULL;
        if (slot == NULL || index == NULL || PyDict_SetItem(calls, index, slot) < 0)
            Py_CLEAR(calls);
        Py_XDECREF(name);
        Py_XDECREF(arguments);
        Py_XDECREF(index);
        Py_XDECREF(slot);
    }
    return calls;
}

static PyObject *said_or_none(int said, PyObject *value)
{
    return said ? PyTuple_Pack(1, value ? value : Py_None) : Py_NewRef(Py_None);
}

static PyObject *chatsse_read(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    (void)module;
    if (nargs != 2 || !PyBytes_Check(args[0]) || !PyList_Check(args[1])) {
        PyErr_SetString(PyExc_TypeError, "read(body: bytes, ends: list[int])");
        return NULL;
    }
    const char *body = PyBytes_AS_STRING(args[0]);
    size_t n = (size_t)PyBytes_GET_SIZE(args[0]);
    Py_ssize_t nends = PyList_GET_SIZE(args[1]);
    Py_ssize_t *ends = PyMem_Malloc((size_t)(nends ? nends : 1) * sizeof(Py_ssize_t));
    if (ends == NULL)
        return PyErr_NoMemory();
    for (Py_ssize_t i = 0; i < nends; i++) {
        ends[i] = PyLong_AsSsize_t(PyList_GET_ITEM(args[1], i));
        if (ends[i] == -1 && PyErr_Occurred()) {
            PyMem_Free(ends);
            return NULL;
        }
    }
    size_t *starts = NULL;
    Py_ssize_t count = loop_only(body, n) ? -1 : frame(body, n, ends, nends, &starts);
    if (count < 0) {
        PyMem_Free(ends);
        return count == -2 ? PyErr_NoMemory() : Py_NewRef(Py_None);
    }
    reading r;
    memset(&r, 0, sizeof(r));
    PyObject *result = NULL;
    int rc = ERROR;
    if ((r.at = PyList_New(0)) && (r.datas = PyList_New(0)) && (r.contents = PyList_New(0)) && (r.reasonings = PyList_New(0)) &&
        (r.tools = PyList_New(0)) && (r.finishes = PyList_New(0)) && (r.usages = PyList_New(0)))
        rc = read_events(&r, body, ends, nends, starts, count);
    if (rc == OK) {
        PyObject *calls = calls_of(&r);
        PyObject *stop_reason = said_or_none(r.stop_reason_said, r.stop_reason);
        PyObject *matched = said_or_none(r.matched_said, r.matched);
        if (calls && stop_reason && matched)
            result = PyTuple_Pack(15, r.at, r.datas, r.contents, r.reasonings, r.tools, r.finishes, r.usages, calls,
                                  r.model ? r.model : Py_None, r.response_id ? r.response_id : Py_None,
                                  r.fingerprint ? r.fingerprint : Py_None, r.timings ? r.timings : Py_None,
                                  r.stop ? r.stop : Py_None, stop_reason, matched);
        Py_XDECREF(calls);
        Py_XDECREF(stop_reason);
        Py_XDECREF(matched);
    }
    else if (rc == DECLINE)
        result = Py_NewRef(Py_None);
    reading_free(&r);
    PyMem_Free(starts);
    PyMem_Free(ends);
    return result;
}

static PyObject *chatsse_loop_only(PyObject *module, PyObject *body)
{
    (void)module;
    if (!PyBytes_Check(body)) {
        PyErr_SetString(PyExc_TypeError, "loop_only(body: bytes)");
        return NULL;
    }
    return PyBool_FromLong(loop_only(PyBytes_AS_STRING(body), (size_t)PyBytes_GET_SIZE(body)));
}

static PyMethodDef methods[] = {
    {"read", (PyCFunction)(void (*)(void))chatsse_read, METH_FASTCALL,
     "read(body, ends) -> tuple | None\n--\n\n"
     "The pieces of chat_stream._typed's reading of an SSE chat body (ends: where each chunk ends), or None\n"
     "where this reader declines it (the Python readers read it then)."},
    {"loop_only", chatsse_loop_only, METH_O,
     "loop_only(body) -> bool\n--\n\nWhether chat_stream.LOOP_ONLY.search(body) finds a match (read declines those bodies)."},
    {NULL, NULL, 0, NULL},
};

static PyModuleDef_Slot slots[] = {
#ifdef Py_mod_multiple_interpreters
    {Py_mod_multiple_interpreters, Py_MOD_PER_INTERPRETER_GIL_SUPPORTED},
#endif
    {0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "infertap._chatsse",
    .m_doc = "The plainest streamed chat answer read in C (yyjson), the twin of infertap.apis.chat_stream._typed.",
    .m_size = 0,
    .m_methods = methods,
    .m_slots = slots,
};

PyMODINIT_FUNC PyInit__chatsse(void) { return PyModuleDef_Init(&module); }

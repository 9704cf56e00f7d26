/* A node's metrics page scanned in C: the two steps of a fleet-size poll that were most of
 * its Python (backend/metrics/exposition.py and value_split.py hold the Python references
 * these must agree with, and say why).
 *
 * The split at the values is exactly Python's re.split(rb"\} ([^ \n]+)\n", text): a value is the
 * run of bytes after "} " up to the next newline, none of them a space or a newline, at
 * least one; matches are found left to right and do not overlap. The heads are the
 * parts between the values ("...}" and " ...\n" of the match belong to neither: the
 * heads are what the regex leaves between matches).
 *
 * heads_key(text) -> (key: bytes, n: int)
 *     key encodes the heads exactly: n + 1 lengths (int64, native order), then the heads
 *     one after another. Two texts have equal keys if and only if their heads are equal,
 *     head by head.
 * values_if_same(text, key) -> bytes | None
 *     text's values as n float64 (native order) where text's heads are those key
 *     encodes and every value reads as a Python float literal (PyOS_string_to_double:
 *     "+Inf", "NaN", "1e-3"); else None. Reads text once, copies nothing but the values.
 *
 * keep_lines(text, starts, families, samples) -> bytes
 *     backend/metrics/exposition.prefilter_by_line's result on bytes (the reference the
 *     tests check it against): the lines that start with one of *starts* and are a
 *     "# HELP"/"# TYPE" line of a name in *families* or a sample line of a name in
 *     *samples* (the name ends at the line's first "{", else its first " ", else one
 *     byte before the line's end), joined by newlines, with a newline after the last.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

/* The next match at or after pos: sets *vstart/*vend (the value's bytes) and returns
 * the match's start ('}'), or -1. */
static Py_ssize_t
next_value(const char *s, Py_ssize_t n, Py_ssize_t pos, Py_ssize_t *vstart, Py_ssize_t *vend)
{
    while (pos < n) {
        const char *p = memchr(s + pos, '}', (size_t)(n - pos));
        if (p == NULL)
            return -1;
        Py_ssize_t close = p - s;
        if (close + 1 < n && s[close + 1] == ' ') {
            Py_ssize_t j = close + 2;
            while (j < n && s[j] != ' ' && s[j] != '\n')
                j++;
            if (j > close + 2 && j < n && s[j] == '\n') {
                *vstart = close + 2;
                *vend = j;
                return close;
            }
        }
        pos = close + 1;
    }
    return -1;
}

typedef struct {
    int64_t *v;
    Py_ssize_t n, cap;
} Lengths;

static int
lengths_add(Lengths *l, int64_t x)
{
    if (l->n == l->cap) {
        Py_ssize_t cap = l->cap ? l->cap * 2 : 1024;
        int64_t *v = PyMem_Realloc(l->v, (size_t)cap * sizeof(int64_t));
        if (v == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        l->v = v;
        l->cap = cap;
    }
    l->v[l->n++] = x;
    return 0;
}

static PyObject *
heads_key(PyObject *self, PyObject *arg)
{
    Py_buffer buf;
    if (PyObject_GetBuffer(arg, &buf, PyBUF_SIMPLE) < 0)
        return NULL;
    const char *s = buf.buf;
    Py_ssize_t n = buf.len, pos = 0, vs, ve, m, heads_len = 0;
    Lengths l = {NULL, 0, 0};
    while ((m = next_value(s, n, pos, &vs, &ve)) >= 0) {
        if (lengths_add(&l, m - pos) < 0)
            goto fail;
        heads_len += m - pos;
        pos = ve + 1;
    }
    if (lengths_add(&l, n - pos) < 0)
        goto fail;
    heads_len += n - pos;
    Py_ssize_t values = l.n - 1;
    Py_ssize_t size = (Py_ssize_t)sizeof(int64_t) * (1 + l.n) + heads_len;
    PyObject *key = PyBytes_FromStringAndSize(NULL, size);
    if (key == NULL)
        goto fail;
    char *out = PyBytes_AS_STRING(key);
    int64_t count = values;
    memcpy(out, &count, sizeof count);
    memcpy(out + sizeof count, l.v, (size_t)l.n * sizeof(int64_t));
    char *h = out + sizeof(int64_t) * (1 + l.n);
    pos = 0;
    for (Py_ssize_t i = 0; i < l.n; i++) {
        memcpy(h, s + pos, (size_t)l.v[i]);
        h += l.v[i];
        if (i + 1 < l.n) {  /* skip the match after head i */
            next_value(s, n, pos + l.v[i], &vs, &ve);
            pos = ve + 1;
        }
    }
    PyMem_Free(l.v);
    PyBuffer_Release(&buf);
    return Py_BuildValue("(Nn)", key, values);
fail:
    PyMem_Free(l.v);
    PyBuffer_Release(&buf);
    return NULL;
}

static PyObject *
values_if_same(PyObject *self, PyObject *args)
{
    Py_buffer buf, kbuf;
    if (!PyArg_ParseTuple(args, "y*y*", &buf, &kbuf))
        return NULL;
    PyObject *result = NULL, *out = NULL;
    const char *s = buf.buf, *k = kbuf.buf;
    Py_ssize_t n = buf.len, klen = kbuf.len;
    int64_t count;
    if (klen < (Py_ssize_t)sizeof count)
        goto differ;
    memcpy(&count, k, sizeof count);
    if (count < 0 || (klen - (Py_ssize_t)sizeof count) / (Py_ssize_t)sizeof(int64_t) < count + 1)
        goto differ;
    const char *lens = k + sizeof count;          /* count + 1 int64, maybe unaligned */
    const char *heads = lens + (count + 1) * sizeof(int64_t);
    const char *heads_end = k + klen;
    out = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)(count * sizeof(double)));
    if (out == NULL)
        goto done;
    double *vals = (double *)PyBytes_AS_STRING(out);
    Py_ssize_t pos = 0, vs, ve, m;
    for (int64_t i = 0; i <= count; i++) {
        int64_t len;
        memcpy(&len, lens + i * sizeof(int64_t), sizeof len);
        if (i < count) {
            m = next_value(s, n, pos, &vs, &ve);
            if (m < 0 || m - pos != len)
                goto differ;
        } else {
            if (next_value(s, n, pos, &vs, &ve) >= 0 || n - pos != len)
                goto differ;
            m = n;
        }
        if (len > heads_end - heads || memcmp(heads, s + pos, (size_t)len) != 0)
            goto differ;
        heads += len;
        if (i == count)
            break;
        /* The value, followed by its newline: parsing stops there. */
        char *end = NULL;
        double x = PyOS_string_to_double(s + vs, &end, NULL);
        if (end != s + ve) {
            PyErr_Clear();
            goto differ;
        }
        if (x == -1.0 && PyErr_Occurred()) {
            PyErr_Clear();
            goto differ;
        }
        vals[i] = x;
        pos = ve + 1;
    }
    if (heads != heads_end)
        goto differ;
    result = out;
    out = NULL;
    goto done;
differ:
    result = Py_NewRef(Py_None);
done:
    Py_XDECREF(out);
    PyBuffer_Release(&buf);
    PyBuffer_Release(&kbuf);
    return result;
}


/* Whether s[0:len] is in the set (a frozenset of bytes). -1 on error. */
static int
in_set(PyObject *set, const char *s, Py_ssize_t len)
{
    PyObject *b = PyBytes_FromStringAndSize(s, len);
    if (b == NULL)
        return -1;
    int r = PySet_Contains(set, b);
    Py_DECREF(b);
    return r;
}

static PyObject *
keep_lines(PyObject *self, PyObject *args)
{
    Py_buffer buf;
    PyObject *starts, *families, *samples;
    if (!PyArg_ParseTuple(args, "y*O!O!O!", &buf, &PyTuple_Type, &starts,
                          &PyFrozenSet_Type, &families, &PyFrozenSet_Type, &samples))
        return NULL;
    PyObject *out = NULL;
    Py_ssize_t nstarts = PyTuple_GET_SIZE(starts);
    for (Py_ssize_t i = 0; i < nstarts; i++) {
        if (!PyBytes_Check(PyTuple_GET_ITEM(starts, i))) {
            PyErr_SetString(PyExc_TypeError, "starts must be bytes");
            goto done;
        }
    }
    const char *s = buf.buf;
    Py_ssize_t n = buf.len, pos = 0, o = 0;
    out = PyBytes_FromStringAndSize(NULL, n + 1);
    if (out == NULL)
        goto done;
    char *dst = PyBytes_AS_STRING(out);
    /* The last name looked up and the answer: a family's lines come together, so most
     * lines ask about the name the line before asked about. */
    const char *last = NULL;
    Py_ssize_t last_len = -1;
    int last_comment = -1, last_keep = 0;
    while (pos <= n) {
        const char *nl = pos < n ? memchr(s + pos, '\n', (size_t)(n - pos)) : NULL;
        Py_ssize_t end = nl ? nl - s : n;
        const char *line = s + pos;
        Py_ssize_t len = end - pos;
        int started = 0;
        for (Py_ssize_t i = 0; i < nstarts && !started; i++) {
            PyObject *st = PyTuple_GET_ITEM(starts, i);
            Py_ssize_t sl = PyBytes_GET_SIZE(st);
            started = sl <= len && memcmp(line, PyBytes_AS_STRING(st), (size_t)sl) == 0;
        }
        if (started) {
            const char *name;
            Py_ssize_t name_len;
            int comment = line[0] == '#';
            if (comment) {  /* "# TYPE name type" / "# HELP name text" */
                const char *sp = len > 7 ? memchr(line + 7, ' ', (size_t)(len - 7)) : NULL;
                name = line + 7;
                name_len = sp ? sp - name : len - 7;
                if (name_len < 0)
                    name_len = 0;
            } else {
                const char *br = memchr(line, '{', (size_t)len);
                if (br == NULL)
                    br = memchr(line, ' ', (size_t)len);
                name = line;
                /* No "{" and no " ": Python's line[:-1], the line less its last byte. */
                name_len = br ? br - line : (len > 0 ? len - 1 : 0);
            }
            int keep;
            if (comment == last_comment && name_len == last_len
                    && memcmp(name, last, (size_t)name_len) == 0) {
                keep = last_keep;
            } else {
                keep = in_set(comment ? families : samples, name, name_len);
                if (keep < 0) {
                    Py_CLEAR(out);
                    goto done;
                }
                last = name;
                last_len = name_len;
                last_comment = comment;
                last_keep = keep;
            }
            if (keep) {
                memcpy(dst + o, line, (size_t)len);
                o += len;
                dst[o++] = '\n';
            }
        }
        if (nl == NULL)
            break;
        pos = end + 1;
    }
    if (_PyBytes_Resize(&out, o) < 0)
        out = NULL;
done:
    PyBuffer_Release(&buf);
    return out;
}

static PyMethodDef methods[] = {
    {"heads_key", heads_key, METH_O,
     "heads_key(text) -> (key, n): the heads of text split at its values, encoded."},
    {"values_if_same", values_if_same, METH_VARARGS,
     "values_if_same(text, key) -> bytes | None: text's values as float64 where its "
     "heads are key's and every value is a number, else None."},
    {"keep_lines", keep_lines, METH_VARARGS,
     "keep_lines(text, starts, families, samples) -> bytes: the lines "
     "exposition.prefilter_by_line keeps."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_page_scan",
    "A node's metrics page cut and split at its values (exposition.py, value_split.py).",
    -1, methods,
};

PyMODINIT_FUNC
PyInit__page_scan(void)
{
    return PyModule_Create(&module);
}

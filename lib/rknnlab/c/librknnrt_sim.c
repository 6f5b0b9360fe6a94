/*
 * librknnrt_sim.c -- librknnrt.so for PCs: the course's simulator behind the
 * runtime's C API, so that a C program written for a board compiles and runs
 * unchanged on a PC (python -m rknnlab cc builds it on first use).
 *
 * Every exported function is one line: it hands its arguments, pointers as
 * integers, to the same-named function of the Python module rknnlab.sim.capi,
 * which maps the caller's structs onto ctypes (from_address: no copies) and
 * calls rknnlab.sim.SimRuntime.  So the return codes and semantics are the
 * simulator's Python side itself: one implementation, not two.
 *
 * The interpreter is embedded: the first call starts CPython (the one this
 * library was built for, and its venv, so numpy and rknnlab import), imports
 * rknnlab.sim.capi and releases the GIL; every call then takes the GIL for
 * its duration (PyGILState_Ensure), so C threads may call concurrently, as
 * they may call librknnrt.  Python's own signal handlers are not installed:
 * Ctrl-C stops the program as it would without Python; the C stdio streams keep
 * their buffering (Python's unbuffered mode would change the program's stdout).
 *
 * What the interpreter costs in memory is read from /proc/self/statm before
 * and after it starts and handed to capi, which prints it once (stderr), so
 * that a C program's RSS can be read against it.
 *
 * Built with (python -m rknnlab cc does it):
 *   cc -O2 -shared -fPIC -pthread -I<Python include dir> librknnrt_sim.c
 *      -DRKNNLAB_PYTHON='"<venv>/bin/python"' -DRKNNLAB_LIB='"<dir holding rknnlab>"'
 *      -L<Python lib dir> -lpython3.X -Wl,-rpath,<Python lib dir> -Wl,-soname,librknnrt.so
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <unistd.h>

#include "rknn_api.h"

#ifndef RKNNLAB_PYTHON
#error "define RKNNLAB_PYTHON: the python executable (of the venv) whose rknnlab this library runs"
#endif
#ifndef RKNNLAB_LIB
#error "define RKNNLAB_LIB: the directory that holds the rknnlab package"
#endif

#define EXPORT __attribute__((visibility("default")))

/* the version of the contract between this file and rknnlab/sim/capi.py */
#define CAPI_ABI 2

static pthread_once_t started = PTHREAD_ONCE_INIT;
static PyObject *capi;          /* rknnlab.sim.capi, or NULL when Python did not start */

static long rss_kb(void)
{
    long pages = 0, resident = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    if (!f)
        return -1;
    if (fscanf(f, "%ld %ld", &pages, &resident) != 2)
        resident = -1;
    fclose(f);
    return resident < 0 ? -1 : resident * (sysconf(_SC_PAGESIZE) / 1024);
}

static void import_capi(long before, int embedded)
{
    capi = PyImport_ImportModule("rknnlab.sim.capi");
    if (capi) {
        PyObject *r = PyObject_CallMethod(capi, "started", "iiilli", CAPI_ABI, PY_MAJOR_VERSION,
                                          PY_MINOR_VERSION, before, rss_kb(), embedded);
        if (!r) {
            Py_CLEAR(capi);
        }
        Py_XDECREF(r);
    }
    if (!capi) {
        fprintf(stderr, "librknnrt (rknnlab simulator): cannot import rknnlab.sim.capi from %s "
                        "with %s:\n", RKNNLAB_LIB, RKNNLAB_PYTHON);
        PyErr_Print();
    }
}

static void start_python(void)
{
    long before = rss_kb();
    if (!Py_IsInitialized() && access(RKNNLAB_PYTHON, X_OK) != 0) {
        fprintf(stderr, "librknnrt (rknnlab simulator): the Python this library was built with (%s) "
                        "is gone (a venv moved or deleted?): compile the program again with "
                        "python -m rknnlab cc, which builds the library for the Python it runs in\n",
                RKNNLAB_PYTHON);
        return;
    }
    if (Py_IsInitialized()) {   /* loaded into a Python process (ctypes): use its interpreter */
        PyGILState_STATE gil = PyGILState_Ensure();
        import_capi(before, 0);
        PyGILState_Release(gil);
        return;
    }
    PyConfig config;
    PyConfig_InitPythonConfig(&config);
    config.install_signal_handlers = 0;   /* the program's signals stay the program's */
    config.parse_argv = 0;
    config.use_environment = 0;           /* PYTHONPATH/PYTHONHOME of the shell must not pick another rknnlab */
    PyStatus status = PyConfig_SetBytesString(&config, &config.program_name, RKNNLAB_PYTHON);
    if (!PyStatus_Exception(status))
        status = Py_InitializeFromConfig(&config);
    PyConfig_Clear(&config);
    if (PyStatus_Exception(status)) {
        fprintf(stderr, "librknnrt (rknnlab simulator): cannot start Python %s: %s\n", RKNNLAB_PYTHON,
                status.err_msg ? status.err_msg : "unknown error");
        return;
    }
    PyObject *path = PySys_GetObject("path");          /* borrowed */
    PyObject *lib = PyUnicode_DecodeFSDefault(RKNNLAB_LIB);
    if (path && lib)
        PyList_Insert(path, 0, lib);
    Py_XDECREF(lib);
    import_capi(before, 1);
    PyEval_SaveThread();   /* every call takes the GIL for itself, from any thread */
}

/* capi.<name>(*args) with the GIL held; the result as an integer, or fallback
 * when Python could not start or the call raised (capi prints why). */
static unsigned long long call(unsigned long long fallback, const char *name, const char *fmt, ...)
{
    pthread_once(&started, start_python);
    if (!capi)
        return fallback;
    PyGILState_STATE gil = PyGILState_Ensure();
    unsigned long long result = fallback;
    va_list ap;
    va_start(ap, fmt);
    PyObject *args = Py_VaBuildValue(fmt, ap);
    va_end(ap);
    PyObject *fn = args ? PyObject_GetAttrString(capi, name) : NULL;
    PyObject *r = fn ? PyObject_CallObject(fn, args) : NULL;
    if (r) {
        result = PyLong_AsUnsignedLongLongMask(r);
        if (PyErr_Occurred())
            result = fallback;
    }
    if (PyErr_Occurred())
        PyErr_Print();
    Py_XDECREF(r);
    Py_XDECREF(fn);
    Py_XDECREF(args);
    PyGILState_Release(gil);
    return result;
}

#define P(x) ((unsigned long long)(uintptr_t)(x))
#define ERR ((unsigned long long)(long long)RKNN_ERR_FAIL)
#define CODE(name, fmt, ...) ((int)(long long)call(ERR, name, fmt, __VA_ARGS__))
#define MEM(name, fmt, ...) ((rknn_tensor_mem *)(uintptr_t)call(0, name, fmt, __VA_ARGS__))

EXPORT int rknn_init(rknn_context *context, void *model, uint32_t size, uint32_t flag,
                     rknn_init_extend *extend)
{
    return CODE("rknn_init", "(KKIIK)", P(context), P(model), size, flag, P(extend));
}

EXPORT int rknn_dup_context(rknn_context *context_in, rknn_context *context_out)
{
    return CODE("rknn_dup_context", "(KK)", P(context_in), P(context_out));
}

EXPORT int rknn_destroy(rknn_context context)
{
    return CODE("rknn_destroy", "(K)", (unsigned long long)context);
}

EXPORT int rknn_query(rknn_context context, rknn_query_cmd cmd, void *info, uint32_t size)
{
    return CODE("rknn_query", "(KiKI)", (unsigned long long)context, (int)cmd, P(info), size);
}

EXPORT int rknn_set_core_mask(rknn_context context, rknn_core_mask core_mask)
{
    return CODE("rknn_set_core_mask", "(Ki)", (unsigned long long)context, (int)core_mask);
}

EXPORT int rknn_set_batch_core_num(rknn_context context, int core_num)
{
    return CODE("rknn_set_batch_core_num", "(Ki)", (unsigned long long)context, core_num);
}

EXPORT int rknn_set_input_shapes(rknn_context context, uint32_t n_inputs, rknn_tensor_attr attr[])
{
    return CODE("rknn_set_input_shapes", "(KIK)", (unsigned long long)context, n_inputs, P(attr));
}

EXPORT int rknn_set_input_shape(rknn_context context, rknn_tensor_attr *attr)
{
    return CODE("rknn_set_input_shape", "(KK)", (unsigned long long)context, P(attr));
}

EXPORT int rknn_inputs_set(rknn_context context, uint32_t n_inputs, rknn_input inputs[])
{
    return CODE("rknn_inputs_set", "(KIK)", (unsigned long long)context, n_inputs, P(inputs));
}

EXPORT int rknn_run(rknn_context context, rknn_run_extend *extend)
{
    return CODE("rknn_run", "(KK)", (unsigned long long)context, P(extend));
}

EXPORT int rknn_wait(rknn_context context, rknn_run_extend *extend)
{
    return CODE("rknn_wait", "(KK)", (unsigned long long)context, P(extend));
}

EXPORT int rknn_outputs_get(rknn_context context, uint32_t n_outputs, rknn_output outputs[],
                            rknn_output_extend *extend)
{
    return CODE("rknn_outputs_get", "(KIKK)", (unsigned long long)context, n_outputs, P(outputs),
                P(extend));
}

EXPORT int rknn_outputs_release(rknn_context context, uint32_t n_outputs, rknn_output outputs[])
{
    return CODE("rknn_outputs_release", "(KIK)", (unsigned long long)context, n_outputs, P(outputs));
}

EXPORT rknn_tensor_mem *rknn_create_mem(rknn_context ctx, uint32_t size)
{
    return MEM("rknn_create_mem", "(KI)", (unsigned long long)ctx, size);
}

EXPORT rknn_tensor_mem *rknn_create_mem2(rknn_context ctx, uint64_t size, uint64_t alloc_flags)
{
    return MEM("rknn_create_mem2", "(KKK)", (unsigned long long)ctx, (unsigned long long)size,
               (unsigned long long)alloc_flags);
}

EXPORT rknn_tensor_mem *rknn_create_mem_from_fd(rknn_context ctx, int32_t fd, void *virt_addr,
                                                uint32_t size, int32_t offset)
{
    return MEM("rknn_create_mem_from_fd", "(KiKIi)", (unsigned long long)ctx, (int)fd, P(virt_addr),
               size, (int)offset);
}

EXPORT rknn_tensor_mem *rknn_create_mem_from_phys(rknn_context ctx, uint64_t phys_addr, void *virt_addr,
                                                  uint32_t size)
{
    return MEM("rknn_create_mem_from_phys", "(KKKI)", (unsigned long long)ctx,
               (unsigned long long)phys_addr, P(virt_addr), size);
}

EXPORT rknn_tensor_mem *rknn_create_mem_from_mb_blk(rknn_context ctx, void *mb_blk, int32_t offset)
{
    return MEM("rknn_create_mem_from_mb_blk", "(KKi)", (unsigned long long)ctx, P(mb_blk), (int)offset);
}

EXPORT int rknn_destroy_mem(rknn_context ctx, rknn_tensor_mem *mem)
{
    return CODE("rknn_destroy_mem", "(KK)", (unsigned long long)ctx, P(mem));
}

EXPORT int rknn_set_weight_mem(rknn_context ctx, rknn_tensor_mem *mem)
{
    return CODE("rknn_set_weight_mem", "(KK)", (unsigned long long)ctx, P(mem));
}

EXPORT int rknn_set_internal_mem(rknn_context ctx, rknn_tensor_mem *mem)
{
    return CODE("rknn_set_internal_mem", "(KK)", (unsigned long long)ctx, P(mem));
}

EXPORT int rknn_set_io_mem(rknn_context ctx, rknn_tensor_mem *mem, rknn_tensor_attr *attr)
{
    return CODE("rknn_set_io_mem", "(KKK)", (unsigned long long)ctx, P(mem), P(attr));
}

EXPORT int rknn_mem_sync(rknn_context context, rknn_tensor_mem *mem, rknn_mem_sync_mode mode)
{
    return CODE("rknn_mem_sync", "(KKi)", (unsigned long long)context, P(mem), (int)mode);
}

/*
 * rknn_api.h -- rknnlab's own declarations of the RKNN runtime C API, for
 * compiling the course's C examples in the test suite (against the test
 * double tests/native_double/rknn_double.c).  Written from the project's
 * facts sheet (names, values, layouts); it is not Rockchip's header.  On a
 * board, compile the examples against the real rknn_api.h from Rockchip's
 * rknn-toolkit2 repository instead (see examples/c/README.md).
 */
#ifndef RKNNLAB_TEST_RKNN_API_H
#define RKNNLAB_TEST_RKNN_API_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if UINTPTR_MAX > 0xffffffffu
typedef uint64_t rknn_context;
#else
typedef uint32_t rknn_context;
#endif

#define RKNN_MAX_DIMS 16
#define RKNN_MAX_NAME_LEN 256

#define RKNN_SUCC 0
#define RKNN_ERR_FAIL -1
#define RKNN_ERR_PARAM_INVALID -5
#define RKNN_ERR_CTX_INVALID -7

#define RKNN_FLAG_MEM_ALLOC_OUTSIDE 0x00000010

typedef enum _rknn_query_cmd {
    RKNN_QUERY_IN_OUT_NUM = 0,
    RKNN_QUERY_INPUT_ATTR = 1,
    RKNN_QUERY_OUTPUT_ATTR = 2,
    RKNN_QUERY_PERF_RUN = 4,
    RKNN_QUERY_SDK_VERSION = 5,
    RKNN_QUERY_MEM_SIZE = 6,
    RKNN_QUERY_NATIVE_INPUT_ATTR = 8,
    RKNN_QUERY_NATIVE_OUTPUT_ATTR = 9,
} rknn_query_cmd;

typedef enum _rknn_tensor_type {
    RKNN_TENSOR_FLOAT32 = 0, RKNN_TENSOR_FLOAT16, RKNN_TENSOR_INT8, RKNN_TENSOR_UINT8,
    RKNN_TENSOR_INT16, RKNN_TENSOR_UINT16, RKNN_TENSOR_INT32, RKNN_TENSOR_UINT32,
    RKNN_TENSOR_INT64, RKNN_TENSOR_BOOL, RKNN_TENSOR_INT4, RKNN_TENSOR_BFLOAT16,
} rknn_tensor_type;

typedef enum _rknn_tensor_format {
    RKNN_TENSOR_NCHW = 0, RKNN_TENSOR_NHWC, RKNN_TENSOR_NC1HWC2, RKNN_TENSOR_UNDEFINED,
} rknn_tensor_format;

typedef enum _rknn_tensor_qnt_type {
    RKNN_TENSOR_QNT_NONE = 0, RKNN_TENSOR_QNT_DFP, RKNN_TENSOR_QNT_AFFINE_ASYMMETRIC,
} rknn_tensor_qnt_type;

typedef struct _rknn_input_output_num { uint32_t n_input; uint32_t n_output; } rknn_input_output_num;

typedef struct _rknn_tensor_attr {
    uint32_t index;
    uint32_t n_dims;
    uint32_t dims[RKNN_MAX_DIMS];
    char name[RKNN_MAX_NAME_LEN];
    uint32_t n_elems;
    uint32_t size;
    rknn_tensor_format fmt;
    rknn_tensor_type type;
    rknn_tensor_qnt_type qnt_type;
    int8_t fl;
    int32_t zp;
    float scale;
    uint32_t w_stride;
    uint32_t size_with_stride;
    uint8_t pass_through;
    uint32_t h_stride;
} rknn_tensor_attr;

typedef struct _rknn_mem_size {
    uint32_t total_weight_size;
    uint32_t total_internal_size;
    uint64_t total_dma_allocated_size;
    uint32_t total_sram_size;
    uint32_t free_sram_size;
    uint32_t reserved[10];
} rknn_mem_size;

typedef struct _rknn_tensor_memory {
    void *virt_addr;
    uint64_t phys_addr;
    int32_t fd;
    int32_t offset;
    uint32_t size;
    uint32_t flags;
    void *priv_data;
} rknn_tensor_mem;

typedef struct _rknn_input {
    uint32_t index;
    void *buf;
    uint32_t size;
    uint8_t pass_through;
    rknn_tensor_type type;
    rknn_tensor_format fmt;
} rknn_input;

typedef struct _rknn_output {
    uint8_t want_float;
    uint8_t is_prealloc;
    uint32_t index;
    void *buf;
    uint32_t size;
} rknn_output;

typedef struct _rknn_init_extend {
    rknn_context ctx;
    int32_t real_model_offset;
    uint32_t real_model_size;
    int32_t model_buffer_fd;
    uint32_t model_buffer_flags;
    uint8_t reserved[112];
} rknn_init_extend;

typedef struct _rknn_run_extend {
    uint64_t frame_id;
    int32_t non_block;
    int32_t timeout_ms;
    int32_t fence_fd;
} rknn_run_extend;

typedef struct _rknn_output_extend { uint64_t frame_id; } rknn_output_extend;

int rknn_init(rknn_context *context, void *model, uint32_t size, uint32_t flag, rknn_init_extend *extend);
int rknn_destroy(rknn_context context);
int rknn_query(rknn_context context, rknn_query_cmd cmd, void *info, uint32_t size);
int rknn_inputs_set(rknn_context context, uint32_t n_inputs, rknn_input inputs[]);
int rknn_run(rknn_context context, rknn_run_extend *extend);
int rknn_outputs_get(rknn_context context, uint32_t n_outputs, rknn_output outputs[], rknn_output_extend *extend);
int rknn_outputs_release(rknn_context context, uint32_t n_outputs, rknn_output outputs[]);

#ifdef __cplusplus
}
#endif
#endif

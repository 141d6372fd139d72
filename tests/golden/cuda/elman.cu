extern "C" __global__ void __launch_bounds__(256) elman_rnn_kernel(float* __restrict__ h0_ptr, float* __restrict__ h2h_ptr, float* __restrict__ hidden_ptr, float* __restrict__ i2h_ptr, float* __restrict__ input_ptr, int B, int Ci, int Co, int cse_v2, int t);
extern "C" __global__ void __launch_bounds__(256) elman_rnn_kernel(float* __restrict__ h0_ptr, float* __restrict__ h2h_ptr, float* __restrict__ hidden_ptr, float* __restrict__ i2h_ptr, float* __restrict__ input_ptr, int B, int Ci, int Co, int cse_v2, int t) {
  alignas(64) float hidden_acc_ptr[1];
  alignas(64) float hidden_acc_ptr_1[1];
  alignas(64) float hidden_acc_ptr_2[1];
  int cse_v3 = ((((int)blockIdx.x) * 256) + ((int)threadIdx.x));
  if (((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) < cse_v2) {
    int cse_v4 = (((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) / Co);
    int cse_v5 = (((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) % Co);
    int cse_v6 = ((t * B) + (((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) / Co));
    int cse_v7 = ((((t * B) + (((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) / Co)) * Co) + (((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) % Co));
    if (1 <= t) {
      hidden_ptr[((((t * B) + (((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) / Co)) * Co) + (((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) % Co))] = 0x0p+0f/*0.000000e+00*/;
      hidden_acc_ptr[0] = hidden_ptr[((((t * B) + (((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) / Co)) * Co) + (((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) % Co))];
      for (int c2 = 0; c2 < Co; ++c2) {
        hidden_acc_ptr[0] = (hidden_acc_ptr[0] + (h2h_ptr[((c2 * Co) + (((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) % Co))] * hidden_ptr[(((((t - 1) * B) + (((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) / Co)) * Co) + c2)]));
      }
      hidden_ptr[((((t * B) + (((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) / Co)) * Co) + (((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) % Co))] = hidden_acc_ptr[0];
    } else {
      hidden_ptr[((((t * B) + (((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) / Co)) * Co) + (((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) % Co))] = 0x0p+0f/*0.000000e+00*/;
      hidden_acc_ptr_1[0] = hidden_ptr[((((t * B) + (((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) / Co)) * Co) + (((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) % Co))];
      for (int c2_1 = 0; c2_1 < Co; ++c2_1) {
        hidden_acc_ptr_1[0] = (hidden_acc_ptr_1[0] + (h2h_ptr[((c2_1 * Co) + (((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) % Co))] * h0_ptr[(((((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) / Co) * Co) + c2_1)]));
      }
      hidden_ptr[((((t * B) + (((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) / Co)) * Co) + (((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) % Co))] = hidden_acc_ptr_1[0];
    }
    if (0 < Ci) {
      hidden_acc_ptr_2[0] = hidden_ptr[((((t * B) + (((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) / Co)) * Co) + (((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) % Co))];
      for (int c2_2 = 0; c2_2 < Ci; ++c2_2) {
        hidden_acc_ptr_2[0] = (hidden_acc_ptr_2[0] + (i2h_ptr[((c2_2 * Co) + (((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) % Co))] * input_ptr[((((t * B) + (((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) / Co)) * Ci) + c2_2)]));
      }
      hidden_ptr[((((t * B) + (((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) / Co)) * Co) + (((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) % Co))] = hidden_acc_ptr_2[0];
    }
    hidden_ptr[((((t * B) + (((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) / Co)) * Co) + (((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) % Co))] = tanhf(hidden_ptr[((((t * B) + (((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) / Co)) * Co) + (((((int)blockIdx.x) * 256) + ((int)threadIdx.x)) % Co))]);
  }
}


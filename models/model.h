// A sequential classifier whose parameters and gradients each live in one contiguous float buffer
// (llm.c style): every layer's weights are a view into parameters(), in layer order, so mixing,
// averaging, compensation and checkpoints work on one span. Model state that is not trained by
// gradients (batch norm's running statistics) lives likewise in a second contiguous buffer, state(),
// in layer order: it belongs in a checkpoint next to the parameters, and an algorithm that averages
// normalization statistics mixes state() as it mixes parameters() (it is empty for models without
// normalization statistics).
//
// Mode: forward_backward() runs the layers in training mode (batch statistics, dropout on); forward(),
// predict() and evaluate() in evaluation mode (running statistics, dropout off).
//
// Activations and workspaces are allocated for the largest batch seen and reused by every later step;
// a step at or below that size allocates nothing.
//
// Memory: every buffer comes from the backend (BackendBuffer), so on the CUDA backend parameters,
// gradients, activations and workspaces are device memory: a training step uploads only the batch
// (features and labels) and downloads only the loss, and evaluate() downloads only the predictions.
// parameters() and gradients() are then device spans the host must not dereference; read_parameters()
// and write_parameters() copy across (plain copies on the CPU backend, where the spans are host memory
// and may be used directly: backend().host_addressable()).
//
// Threads: set_threads(T) splits each training batch into T row ranges computed at once by T copies
// of the layer chain that share the parameters (data parallelism inside one step); their gradients
// are combined into gradients() weighted by rows, so the result is the same mean-loss gradient up to
// float summation order, except that batch norm then normalizes each part with its own statistics (as
// data-parallel training without synchronized batch norm). Each copy keeps its own state during the
// step; afterwards state() is their row-weighted mean, which for the running means is exactly the
// running mean of the whole batch. Each copy draws its own dropout masks (Layer::set_stream). Use it
// with a single-threaded backend so the threads do not oversubscribe.
// Only host-addressable backends take more than one thread (a GPU runs one chain on one stream).
//
// Ownership: the model owns its layers and buffers and shares the backend. Not thread-safe: one
// trainer thread drives it; another thread may read parameters() only while the trainer is waiting.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "models/backend.h"
#include "models/backend_buffer.h"
#include "models/data/dataset.h"
#include "models/layer.h"
#include "models/worker_pool.h"

namespace meridian::models {

struct Evaluation {
  double accuracy = 0.0;  // fraction of samples whose arg-max prediction equals the label
  double loss = 0.0;      // mean softmax cross-entropy
  std::size_t samples = 0;
};

class Model {
 public:
  // `kind` names the architecture ("mlp", "cnn", ...). Layers must chain (each input shape equals the
  // previous output shape) and the last must output `classes` features; throws error::UserError
  // otherwise. Parameters are initialized from `seed` (same seed, same model on every site).
  Model(std::string kind, std::vector<std::unique_ptr<Layer>> layers, std::size_t classes,
        std::shared_ptr<Backend> backend, std::uint64_t seed);

  Model(const Model&) = delete;
  Model& operator=(const Model&) = delete;

  // The parameter buffer in backend memory (see Memory above).
  std::span<float> parameters() { return parameters_.span(); }
  std::span<const float> parameters() const { return parameters_.span(); }
  // Gradients of the last forward_backward(), same layout as parameters(), in backend memory.
  std::span<float> gradients() { return gradients_.span(); }
  std::span<const float> gradients() const { return gradients_.span(); }
  std::size_t parameter_count() const { return parameters_.size(); }
  // The state buffer in backend memory (see above), state_count() floats; empty when no layer has state.
  std::span<float> state() { return state_.span(); }
  std::span<const float> state() const { return state_.span(); }
  std::size_t state_count() const { return state_.size(); }
  // host (state_count()) ← state and the reverse, as read_parameters/write_parameters.
  void read_state(std::span<float> host) const;
  void write_state(std::span<const float> host);
  // host (parameter_count()) ← parameters, after every operation enqueued before; and the reverse.
  // Throws error::InternalError when the host span's size differs.
  void read_parameters(std::span<float> host) const;
  void write_parameters(std::span<const float> host);

  // Threads used by forward_backward (>= 1; batches smaller than 2 rows per thread use one). Throws
  // error::UserError for 0, or for more than 1 on a backend that is not host-addressable.
  void set_threads(std::size_t threads);
  std::size_t threads() const { return replicas_.size(); }

  // Re-draws all parameters from `seed` (He for hidden layers, Xavier for the output layer, zero biases,
  // γ = 1 and β = 0 for normalizations) and resets the state (running mean 0, variance 1).
  void initialize(std::uint64_t seed);

  // One training step's computation on a batch: x (batch, input_size), labels (batch) in [0, classes),
  // both host memory (uploaded into the backend's memory when it is not host-addressable).
  // Overwrites gradients() with the gradient of the mean loss and returns that mean loss.
  // Throws error::InternalError for batch == 0 and error::UserError for a label outside [0, classes)
  // (the backend's softmax_cross_entropy checks every label).
  float forward_backward(const float* x, const std::int32_t* labels, std::size_t batch);
  // DP-SGD's per-example clipping (Abadi et al. 2016): overwrites gradients() with
  // Σ_b min(1, clip/‖g_b‖)·g_b, g_b being the gradient of example b's own loss (the sum over the batch,
  // not the mean), and returns the mean loss. x and labels as forward_backward(). One forward and two
  // backward passes: the first backward gathers every example's gradient norm from the layers' inputs
  // and output gradients (models/per_example_norms.h) without forming per-example gradients; the second
  // computes the sum with each example's output gradient scaled by its factor, which is exact because
  // the parameter gradients are linear in the output gradient. With threads, each thread clips its own
  // rows and the sums add up. Reuses its buffers: a step at or below the largest batch seen allocates
  // nothing. Throws error::UserError when per_example_obstacle() names one, error::InternalError for
  // batch == 0 or a clip that is not positive and finite.
  float clipped_gradient_sum(const float* x, const std::int32_t* labels, std::size_t batch, float clip);
  // Why clipped_gradient_sum() cannot run on this model, or nullopt when it can: a backend that is not
  // host-addressable, or a layer whose gradients mix the examples of a batch (batch norm).
  std::optional<std::string> per_example_obstacle();
  // Logits (batch, classes) for x (batch, input_size, host memory), in backend memory; the pointer is
  // valid until the next call.
  const float* forward(const float* x, std::size_t batch);
  // Arg-max class of each row of x (batch, input_size); both host memory.
  void predict(const float* x, std::size_t batch, std::int32_t* predictions);
  // Accuracy and mean loss over a whole dataset, in chunks of `chunk` rows.
  // Throws error::UserError when the dataset's row size or classes do not fit the model.
  Evaluation evaluate(const data::Dataset& dataset, std::size_t chunk = 256);

  // Architecture and sizes, e.g. "mlp|in=784x1x1|linear(784->256)|relu|...|classes=10|params=235146",
  // with "|state=N" after the parameter count when the model has state.
  // Peers compare it before mixing parameters.
  std::string fingerprint() const;
  // The architecture in words for people: the kind, the sizes between its weighted layers and the
  // parameter count, e.g. "mlp 784-256-128-10 (235,146 parameters)" or
  // "cnn 1x28x28-6x28x28-16x10x10-120-84-10 (61,706 parameters)". Two models with the same summary
  // may still differ (an activation, a kernel size): the fingerprint has every detail.
  std::string summary() const;
  const std::string& kind() const { return kind_; }
  Shape input_shape() const { return layer(0).input_shape(); }
  std::size_t input_size() const { return input_shape().size(); }
  std::size_t classes() const { return classes_; }
  std::size_t layer_count() const { return replicas_[0].layers.size(); }
  const Layer& layer(std::size_t i) const { return *replicas_[0].layers.at(i); }
  // The slice of parameters()/gradients() that belongs to layer i (empty for parameter-free layers).
  std::span<float> layer_parameters(std::size_t i);
  std::span<float> layer_gradients(std::size_t i);
  std::span<float> layer_state(std::size_t i);
  Backend& backend() { return *backend_; }
  const Backend& backend() const { return *backend_; }
  // The threads of set_threads() (null with one thread), for the optimizer to update in slices.
  WorkerPool* pool() { return pool_.get(); }

 private:
  // One copy of the layer chain with its own activations and gradient buffer; replica 0 holds the
  // model's own layers and writes gradients_ directly.
  struct Replica {
    std::vector<std::unique_ptr<Layer>> layers;
    BackendBuffer<float> own_gradients;  // empty for replica 0
    std::span<float> gradients;
    BackendBuffer<float> own_state;  // empty for replica 0
    std::span<float> state;
    bool training = true;  // the mode its layers were last set to
    std::size_t reserved_batch = 0;
    std::vector<BackendBuffer<float>> activations;  // activations[i] = output of layer i, (batch, out_i)
    BackendBuffer<float> grad_a, grad_b;            // ping-pong activation gradients, (batch, widest layer)
    float loss = 0.0f;
    std::vector<float> example_dlogits;  // (batch, classes): each example's own loss gradient, clipping
    std::vector<double> squared_norms;   // (batch): each example's squared gradient norm, clipping
  };

  void reserve(Replica& replica, std::size_t batch);
  void set_training(Replica& replica, bool training);
  const float* forward(Replica& replica, const float* x, std::size_t batch);
  float forward_backward(Replica& replica, const float* x, const std::int32_t* labels, std::size_t batch);
  // The backward pass from replica.grad_a (batch, classes) through every layer.
  void backward(Replica& replica, const float* x, std::size_t batch);
  float clipped_gradient_sum(Replica& replica, const float* x, const std::int32_t* labels, std::size_t batch,
                             float clip);
  // x and labels in backend memory: the host pointers themselves on a host-addressable backend, else
  // uploaded into input_ and labels_.
  const float* stage_input(const float* x, std::size_t batch);
  const std::int32_t* stage_labels(const std::int32_t* labels, std::size_t batch);

  std::string kind_;
  std::size_t classes_;
  std::shared_ptr<Backend> backend_;
  std::vector<std::size_t> offsets_;        // layer i's parameters start at offsets_[i]
  std::vector<std::size_t> state_offsets_;  // and its state at state_offsets_[i]
  BackendBuffer<float> parameters_;
  BackendBuffer<float> gradients_;
  BackendBuffer<float> state_;
  std::vector<Replica> replicas_;
  std::unique_ptr<WorkerPool> pool_;         // null with one thread
  BackendBuffer<float> input_;               // (batch, input_size): the uploaded batch (device backends)
  BackendBuffer<std::int32_t> labels_;       // (batch)
  BackendBuffer<std::int32_t> predictions_;  // (chunk)
  std::vector<std::int32_t> host_predictions_;
};

}  // namespace meridian::models

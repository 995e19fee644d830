#pragma once
/// @file unique_handle.hpp
/// @brief The movable-only owning handle the backends' `request` types are
/// built on: moving takes the whole state and leaves the source empty,
/// overwriting or destroying a handle releases what it holds first.
/// `request_handle` adds a request's `info()` and `valid()`.
///
/// @code
/// struct event_state {
///   cudaEvent_t ev = nullptr;  // default-constructed: the empty state
///   transfer_info info;
///   void release() noexcept {
///     if (ev != nullptr) cudaEventDestroy(ev);
///     ev = nullptr;
///   }
///   bool holds() const noexcept { return ev != nullptr; }
/// };
/// class request : public disttrain::detail::request_handle<event_state> {};
/// @endcode

#include <concepts>
#include <type_traits>
#include <utility>

namespace disttrain::detail {

/// @brief What a `unique_handle` owns: a value whose default-constructed form
/// is the empty state (raw handles at their null value), movable without
/// throwing, with a `release() noexcept` that gives back whatever it holds
/// (cancel, wait, free) and leaves nothing that a later assignment or the
/// destructor could release twice.
template <class S>
concept handle_state = std::default_initializable<S> && std::is_nothrow_move_constructible_v<S> &&
    std::is_nothrow_move_assignable_v<S> && requires(S& s) {
  { s.release() }
  noexcept;
};

/// @brief Movable, non-copyable owner of a `handle_state`.
///
/// - Moving takes the source's state whole and resets the source to `State{}`
///   (so raw handles, flags and plain pointers are emptied too, not copied).
/// - Move assignment releases this handle's state *before* taking the other's:
///   everything the old state referred to is given back while it still exists
///   (e.g. a request that MPI may still read from is cancelled or kept before
///   its buffer goes).
/// - The destructor releases.
///
/// Derive from it and reach the state as `state_` (a backend that is a friend
/// of the derived request reaches it through the request).
template <handle_state State>
class unique_handle {
 public:
  unique_handle() = default;
  unique_handle(unique_handle&& o) noexcept : state_(std::exchange(o.state_, State{})) {}
  unique_handle& operator=(unique_handle&& o) noexcept {
    if (this != &o) {
      state_.release();
      state_ = std::exchange(o.state_, State{});
    }
    return *this;
  }
  unique_handle(const unique_handle&) = delete;
  unique_handle& operator=(const unique_handle&) = delete;
  ~unique_handle() { state_.release(); }

 protected:
  State state_;
};

/// @brief A backend's `request` over a state that records its transfer
/// (`info`) and says whether it holds one (`bool holds() const noexcept`).
template <handle_state State>
class request_handle : public unique_handle<State> {
 public:
  /// @brief The transfer this request stands for.
  [[nodiscard]] const auto& info() const noexcept { return this->state_.info; }
  /// @brief Whether the request refers to a posted transfer not yet waited for.
  [[nodiscard]] bool valid() const noexcept { return this->state_.holds(); }
};

}  // namespace disttrain::detail

#include "compiler/support/Remarks.h"

#include <algorithm>

namespace tessel {

std::string Remark::str() const {
  const char *kind_name = kind == Kind::Missed ? "missed: " : kind == Kind::Note ? "note: " : "";
  return "remark: " + step + ": " + kind_name + message;
}

namespace {

// A loop or buffer met twice (the same stage in two places) is one decision.
void add(std::vector<Remark> &list, Remark r) {
  auto same = [&](const Remark &o) {
    return o.kind == r.kind && o.step == r.step && o.message == r.message;
  };
  if (std::none_of(list.begin(), list.end(), same))
    list.push_back(std::move(r));
}

} // namespace

void Remarks::applied(std::string step, std::string message) {
  add(list_, {Remark::Kind::Applied, std::move(step), std::move(message)});
}

void Remarks::missed(std::string step, std::string message) {
  add(list_, {Remark::Kind::Missed, std::move(step), std::move(message)});
}

void Remarks::note(std::string step, std::string message) {
  add(list_, {Remark::Kind::Note, std::move(step), std::move(message)});
}

} // namespace tessel

// Storage flattening: turns tensor-level accesses into flat buffer accesses. After it, the IR has
// no ProducerLoad, ProducerStore or ProducerRealize left.
//
//  - A producer bound to a Buffer (a function argument) is read and written through that buffer:
//    producer[i, j] becomes buffer.data[buffer.flat_index({i, j})], and its realize, if any, is
//    dropped (the caller owns the memory).
//  - Every other realize becomes an Allocate of its region with one extent, the product of the
//    region's extents; an access inside it indexes the region row-major, relative to the region's
//    minimum: realize T[a:a+n, b:b+m] makes T[i, j] read T[(i - a)*m + (j - b)].
//  - Flat indices and allocation sizes are simplified (ir::simplify).
//  - An access to a producer that is neither bound nor realized around it is a bug of lowering
//    (KILN_ICHECK).
#pragma once

#include <unordered_map>

#include "compiler/ir/function.h"
#include "compiler/ir/stmt.h"

namespace kiln::pass {

ir::Stmt storage_flatten(
    const ir::Stmt& s,
    const std::unordered_map<const ir::ProducerNode*, ir::Buffer>& bound_buffers);

}  // namespace kiln::pass

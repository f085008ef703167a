-- SparseSGD on one float32 row: w[j] -= lr * (g[j] + wd * w[j]), each
-- operation rounded to float32 as the Go kernel rounds it (a product is
-- not fused with the sum). p: lr, wd, as float32 values.
return function(w, g, p, dim, f)
  local lr, wd = p[1], p[2]
  for j = 1, dim do
    local d = g[j]
    if wd ~= 0 then
      d = f(d + f(wd * w[j]))
    end
    w[j] = f(w[j] + f(-lr * d))
  end
end

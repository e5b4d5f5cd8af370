"""What usage reports share: how far back one looks (`spans`). What calls may
spend, budgets and prices, is flow control's (`runtime/flow/`)."""

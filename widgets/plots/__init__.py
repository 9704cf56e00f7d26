"""The plots: the base every stack of linked time plots shares (plot_stack.py) with its
helpers (style, steady ranges, whole-number axes, gaps, markers, the right-click menu and
export), and the plot views built on it (the live plots, the GPU view, the per-replica
view, the load's client plots)."""

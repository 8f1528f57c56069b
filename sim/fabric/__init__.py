"""The fabric as the engine sees it: graphs built from presets, link arrays, indexes of
hosts/GPUs/NICs, and sub-fabrics cut from them."""

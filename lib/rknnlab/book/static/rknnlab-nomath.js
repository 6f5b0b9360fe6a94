/* rknnlab: the book loads no MathJax (no CDN, offline); math stays as TeX source. */

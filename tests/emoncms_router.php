<?php
// Router for PHP's built-in server running emoncms in tests (tests/emoncms_php.py).
// emoncms's .htaccess rewrites every path to index.php?q=<path>; this does the same, so
// /input/post.json reaches emoncms's input controller as it would behind Apache.
$path = parse_url($_SERVER['REQUEST_URI'], PHP_URL_PATH);
$_GET['q'] = ltrim($path, '/');
// The built-in server leaves SERVER_ADDR unset; emoncms's route.php reads it.
$_SERVER['SERVER_ADDR'] = '127.0.0.1';
chdir($_SERVER['DOCUMENT_ROOT']);
require $_SERVER['DOCUMENT_ROOT'] . '/index.php';
